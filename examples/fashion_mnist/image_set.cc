#include "image_set.h"

#include <algorithm>

namespace fashion_mnist {

ImageSet ImageSet::Take(int64_t count) const {
  if (count < 0 || count >= size()) return *this;
  ImageSet out;
  out.rows = rows;
  out.cols = cols;
  const auto pixel_count = static_cast<std::ptrdiff_t>(count * rows * cols);
  out.pixels.assign(pixels.begin(), pixels.begin() + pixel_count);
  out.labels.assign(labels.begin(), labels.begin() + static_cast<std::ptrdiff_t>(count));
  return out;
}

chorus::Dataset ImageSet::ToDataset() const {
  return chorus::Dataset::FromExamples({rows, cols}, pixels, labels);
}

}  // namespace fashion_mnist
