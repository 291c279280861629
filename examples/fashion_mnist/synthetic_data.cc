#include "synthetic_data.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace fashion_mnist {
namespace {

constexpr int kBlobsPerPrototype = 4;
constexpr double kMaxBlend = 0.55;  // weight of the other class's prototype, at most
constexpr double kNoise = 0.15;     // pixel noise, uniform in [-kNoise, kNoise]
constexpr uint64_t kTestStream = 0x9e3779b97f4a7c15ULL;

// Uniform in [0, 1) from the generator's bits: std::uniform_real_distribution's algorithm is
// the library's choice, this one is the same everywhere.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int64_t UniformInt(std::mt19937_64& rng, int64_t n) {
  return std::min(static_cast<int64_t>(Uniform(rng) * static_cast<double>(n)), n - 1);
}

using Image = std::vector<double>;

// A few soft blobs of random position, size and brightness, scaled to [0, 1].
Image Prototype(std::mt19937_64& rng) {
  Image image(static_cast<size_t>(kImageRows * kImageCols), 0.0);
  for (int b = 0; b < kBlobsPerPrototype; ++b) {
    const double cy = 4 + Uniform(rng) * 20, cx = 4 + Uniform(rng) * 20;
    const double sy = 2 + Uniform(rng) * 6, sx = 2 + Uniform(rng) * 6;
    const double brightness = 0.3 + 0.7 * Uniform(rng);
    for (int64_t y = 0; y < kImageRows; ++y) {
      for (int64_t x = 0; x < kImageCols; ++x) {
        const double dy = (static_cast<double>(y) - cy) / sy;
        const double dx = (static_cast<double>(x) - cx) / sx;
        image[static_cast<size_t>(y * kImageCols + x)] +=
            brightness * std::exp(-0.5 * (dy * dy + dx * dx));
      }
    }
  }
  const double peak = *std::max_element(image.begin(), image.end());
  for (double& p : image) p /= peak;
  return image;
}

ImageSet Generate(const std::vector<Image>& prototypes, int64_t count, std::mt19937_64& rng) {
  ImageSet set;
  const auto pixels = static_cast<size_t>(kImageRows * kImageCols);
  set.pixels.resize(static_cast<size_t>(count) * pixels);
  set.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const auto label = static_cast<int32_t>(UniformInt(rng, kNumClasses));
    // Another class, uniformly.
    auto other = static_cast<int32_t>(UniformInt(rng, kNumClasses - 1));
    if (other >= label) ++other;
    const double blend = kMaxBlend * Uniform(rng);
    const Image& own = prototypes[static_cast<size_t>(label)];
    const Image& mix = prototypes[static_cast<size_t>(other)];
    float* out = set.pixels.data() + static_cast<size_t>(i) * pixels;
    for (size_t p = 0; p < pixels; ++p) {
      const double noise = kNoise * (2 * Uniform(rng) - 1);
      const double value = (1 - blend) * own[p] + blend * mix[p] + noise;
      out[p] = static_cast<float>(std::clamp(value, 0.0, 1.0));
    }
    set.labels[static_cast<size_t>(i)] = label;
  }
  return set;
}

}  // namespace

TrainAndTest GenerateSyntheticData(uint64_t seed, int64_t train_size, int64_t test_size) {
  std::mt19937_64 rng(seed);
  std::vector<Image> prototypes;
  for (int c = 0; c < kNumClasses; ++c) prototypes.push_back(Prototype(rng));
  TrainAndTest data;
  data.train = Generate(prototypes, std::max<int64_t>(train_size, 0), rng);
  std::mt19937_64 test_rng(seed ^ kTestStream);
  data.test = Generate(prototypes, std::max<int64_t>(test_size, 0), test_rng);
  data.source = "synthetic data (seed " + std::to_string(seed) + ", " +
                std::to_string(data.train.size()) + " train and " +
                std::to_string(data.test.size()) + " test images)";
  return data;
}

}  // namespace fashion_mnist
