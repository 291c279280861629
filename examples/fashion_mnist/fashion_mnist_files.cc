#include "fashion_mnist_files.h"

#include <chorus/base/error.h>

#include <filesystem>
#include <string>
#include <vector>

namespace fashion_mnist {
namespace {

// A data-set file or folder that is not what Fashion-MNIST is.
[[noreturn]] void FailData(const std::string& message) {
  throw chorus::Error(CHORUS_INVALID_ARGUMENT, message);
}

// dir/name, else dir/name.gz, else empty.
std::string Find(const std::filesystem::path& dir, const std::string& name) {
  for (const std::string& candidate : {name, name + ".gz"}) {
    const std::filesystem::path path = dir / candidate;
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) return path.string();
  }
  return {};
}

}  // namespace

ImageSet ImageSetFromIdx(const IdxArray& images, const IdxArray& labels, const std::string& what) {
  if (images.dims.size() != 3) {
    FailData(what + ": the images file has " + std::to_string(images.dims.size()) +
             " dimensions; expected 3 (count, rows, columns)");
  }
  if (labels.dims.size() != 1) {
    FailData(what + ": the labels file has " + std::to_string(labels.dims.size()) +
             " dimensions; expected 1");
  }
  if (images.dims[0] != labels.dims[0]) {
    FailData(what + ": " + std::to_string(images.dims[0]) + " images but " +
             std::to_string(labels.dims[0]) + " labels");
  }
  ImageSet set;
  set.rows = images.dims[1];
  set.cols = images.dims[2];
  set.pixels.reserve(images.data.size());
  for (uint8_t p : images.data) set.pixels.push_back(static_cast<float>(p) / 255.0f);
  set.labels.reserve(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kNumClasses) {
      FailData(what + ": label " + std::to_string(i) + " is " + std::to_string(labels.data[i]) +
               "; classes are 0.." + std::to_string(kNumClasses - 1));
    }
    set.labels.push_back(labels.data[i]);
  }
  return set;
}

std::optional<TrainAndTest> LoadFashionMnist(const std::string& dir) {
  const std::vector<std::string> names = {kTrainImages, kTrainLabels, kTestImages, kTestLabels};
  std::vector<std::string> paths;
  std::string missing;
  size_t missing_count = 0;
  for (const std::string& name : names) {
    paths.push_back(Find(dir, name));
    if (!paths.back().empty()) continue;
    missing += (missing.empty() ? "" : ", ") + name + "[.gz]";
    ++missing_count;
  }
  if (missing_count == names.size()) return std::nullopt;
  if (missing_count > 0) {
    FailData("Fashion-MNIST in '" + dir + "' is incomplete: missing " + missing);
  }
  TrainAndTest data;
  data.train = ImageSetFromIdx(ReadIdx(paths[0]), ReadIdx(paths[1]), "the train set");
  data.test = ImageSetFromIdx(ReadIdx(paths[2]), ReadIdx(paths[3]), "the test set");
  data.source = "Fashion-MNIST from " + dir + " (" + std::to_string(data.train.size()) +
                " train and " + std::to_string(data.test.size()) + " test images)";
  return data;
}

}  // namespace fashion_mnist
