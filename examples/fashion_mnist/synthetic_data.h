// A synthetic stand-in for Fashion-MNIST with the same shapes (28x28 images in [0, 1], 10
// classes), for machines without the data set. Each class has a fixed random prototype image;
// an example is its class's prototype blended with another class's prototype (by up to 55%, so
// about a tenth of the examples are ambiguous and accuracy stays below 100%), plus pixel noise.
// Deterministic: the same seed gives the same images on every platform.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_SYNTHETIC_DATA_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_SYNTHETIC_DATA_H_

#include <cstdint>

#include "image_set.h"

namespace fashion_mnist {

inline constexpr int64_t kFashionMnistTrainSize = 60000;
inline constexpr int64_t kFashionMnistTestSize = 10000;

// train_size and test_size examples; the test set is drawn from the same distribution (same
// prototypes) with an independent stream of the same seed.
TrainAndTest GenerateSyntheticData(uint64_t seed, int64_t train_size = kFashionMnistTrainSize,
                                   int64_t test_size = kFashionMnistTestSize);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_SYNTHETIC_DATA_H_
