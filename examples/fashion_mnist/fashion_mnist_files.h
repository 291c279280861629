// Finds and loads the four Fashion-MNIST IDX files of a directory.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_FASHION_MNIST_FILES_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_FASHION_MNIST_FILES_H_

#include <optional>
#include <string>

#include "idx_reader.h"
#include "image_set.h"

namespace fashion_mnist {

// The base names; each may also end in ".gz".
inline constexpr const char* kTrainImages = "train-images-idx3-ubyte";
inline constexpr const char* kTrainLabels = "train-labels-idx1-ubyte";
inline constexpr const char* kTestImages = "t10k-images-idx3-ubyte";
inline constexpr const char* kTestLabels = "t10k-labels-idx1-ubyte";

// Images [n, rows, cols] and labels [n] as an ImageSet (pixels scaled to [0, 1]). Throws
// chorus::Error naming `what` when the shapes disagree or a label is not a class.
ImageSet ImageSetFromIdx(const IdxArray& images, const IdxArray& labels, const std::string& what);

// The data set in `dir`: nullopt when none of the four files is there; an error naming the
// missing ones when only some are.
std::optional<TrainAndTest> LoadFashionMnist(const std::string& dir);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_FASHION_MNIST_FILES_H_
