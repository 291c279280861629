// Shared by the integration tests: the fashion_mnist example's trainer on small synthetic data,
// under a strategy built from virtual cpu devices.
#pragma once

#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model.h"
#include "synthetic_data.h"
#include "trainer.h"

namespace fashion_mnist::test {

// The tutorial's global batch, which the equivalence tests train with.
constexpr int64_t kGlobalBatch = 64;

enum class Kind { kOneDevice, kMirrored, kCentralStorage };

// n virtual cpu devices from the process's registry (which also finds the build's plugins).
inline std::vector<chorus::Device> CpuDevices(uint32_t n) {
  auto cpu = chorus::DeviceEnumerator::Create(
      chorus::Registry::Global().FindPlugin(chorus::kBuiltinPluginName),
      {{"count", std::to_string(n)}});
  std::vector<chorus::Device> devices;
  for (uint32_t i = 0; i < n; ++i) devices.push_back({cpu, i});
  return devices;
}

inline std::unique_ptr<chorus::Strategy> MakeStrategy(Kind kind, uint32_t replicas,
                                                      const std::string& cross_device_ops = "") {
  switch (kind) {
    case Kind::kOneDevice:
      return std::make_unique<chorus::OneDeviceStrategy>(CpuDevices(1)[0]);
    case Kind::kMirrored:
      return std::make_unique<chorus::MirroredStrategy>(CpuDevices(replicas), cross_device_ops);
    case Kind::kCentralStorage:
      return std::make_unique<chorus::CentralStorageStrategy>(CpuDevices(replicas));
  }
  return nullptr;
}

// The largest difference between two sets of weights, relative to each tensor's magnitude:
// max over tensors of max_i |a_i - b_i| / max_i |b_i| (the infinity-norm relative error). Float
// summation in another order moves a weight by an ulp of the tensor's scale, ~1e-8 here; divided
// by a weight that happens to be near zero that ulp would read as a large "relative" error.
inline double MaxRelativeDifference(const HostWeights& a, const HostWeights& b) {
  double worst = 0;
  const auto part = [&](const std::vector<float>& x, const std::vector<float>& y) {
    if (x.size() != y.size()) {
      worst = INFINITY;
      return;
    }
    double difference = 0, scale = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      difference = std::max(difference, std::fabs(static_cast<double>(x[i]) - y[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(y[i])));
    }
    worst = std::max(worst, scale > 0 ? difference / scale : difference);
  };
  part(a.kernel1, b.kernel1);
  part(a.bias1, b.bias1);
  part(a.kernel2, b.kernel2);
  part(a.bias2, b.bias2);
  return worst;
}

}  // namespace fashion_mnist::test
