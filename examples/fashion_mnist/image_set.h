// A labelled set of grayscale images in memory: the shape of Fashion-MNIST's train and test sets.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_IMAGE_SET_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_IMAGE_SET_H_

#include <chorus/distribute/dataset.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fashion_mnist {

inline constexpr int64_t kImageRows = 28;
inline constexpr int64_t kImageCols = 28;
inline constexpr int32_t kNumClasses = 10;

struct ImageSet {
  int64_t rows = kImageRows;
  int64_t cols = kImageCols;
  std::vector<float> pixels;    // size() images of rows x cols, row-major, values in [0, 1]
  std::vector<int32_t> labels;  // one class in [0, kNumClasses) per image

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  // The first `count` images (all when count is negative or not smaller than size()).
  ImageSet Take(int64_t count) const;
  // An unbatched chorus::Dataset of examples shaped [rows, cols].
  chorus::Dataset ToDataset() const;
};

// Train and test sets, and where they came from (for the log).
struct TrainAndTest {
  ImageSet train;
  ImageSet test;
  std::string source;
};

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_IMAGE_SET_H_
