// Runs the same batch of gradient all-reduces through every cross-device ops backend chorus
// finds (the builtin ReductionToOneDevice, plugins such as hierarchical_copy), checks each
// result against the exact answer, and prints the time per step. A first look at the backends;
// chorus-bench is the tool for real measurements.
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/registry.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

namespace {

using chorus::CrossDeviceOps;
using chorus::Device;
using chorus::DeviceBuffer;

// Gradient sizes of a small CNN: conv kernels, biases, dense layers.
const std::vector<size_t> kTensorSizes = {288, 32, 18432, 64, 401408, 128, 1280, 10};

float Value(size_t replica, size_t tensor, size_t i) {
  return static_cast<float>((replica + 1) * ((tensor + i) % 5));
}

struct Result {
  double ms_per_step = 0;
  size_t wrong = 0;
};

Result RunBackend(const std::string& name, const std::vector<Device>& devices, int steps,
                  const chorus::Options& options) {
  auto ops = CrossDeviceOps::Create(chorus::Registry::Global(), name, devices, options);
  const size_t n = devices.size();
  std::vector<std::vector<DeviceBuffer>> grads(n);
  std::vector<chorus::ReduceSpec> specs(kTensorSizes.size());
  for (size_t t = 0; t < kTensorSizes.size(); ++t) {
    specs[t].dtype = CHORUS_F32;
    specs[t].count = kTensorSizes[t];
  }
  auto fill = [&] {
    for (size_t d = 0; d < n; ++d) {
      for (size_t t = 0; t < kTensorSizes.size(); ++t) {
        std::vector<float> host(kTensorSizes[t]);
        for (size_t i = 0; i < host.size(); ++i) host[i] = Value(d, t, i);
        grads[d][t].CopyFromHost(host.data(), host.size() * sizeof(float));
      }
    }
  };
  for (size_t d = 0; d < n; ++d) {
    for (size_t t = 0; t < kTensorSizes.size(); ++t) {
      grads[d].emplace_back(devices[d], kTensorSizes[t] * sizeof(float));
      specs[t].inputs.push_back(grads[d][t].buffer());
    }
  }
  for (auto& spec : specs) spec.outputs = spec.inputs;

  fill();
  ops->BatchReduce(CHORUS_REDUCE_MEAN, specs);  // warm-up, and the checked result
  Result result;
  const float mean_factor = static_cast<float>(n + 1) / 2;
  for (size_t d = 0; d < n; ++d) {
    for (size_t t = 0; t < kTensorSizes.size(); ++t) {
      std::vector<float> host(kTensorSizes[t]);
      grads[d][t].CopyToHost(host.data(), host.size() * sizeof(float));
      for (size_t i = 0; i < host.size(); ++i) {
        if (host[i] != static_cast<float>((t + i) % 5) * mean_factor) ++result.wrong;
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) ops->BatchReduce(CHORUS_REDUCE_SUM, specs);
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  result.ms_per_step = elapsed.count() / std::max(steps, 1);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs one batch of gradient all-reduces through every cross-device ops backend"};
  int steps = 20;
  int num_packs = 1;
  app.add_option("--steps", steps, "timed steps per backend")->check(CLI::PositiveNumber);
  app.add_option("--num-packs", num_packs, "num_packs for backends that pack")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    auto& registry = chorus::Registry::Global();
    const auto devices = registry.DefaultDevices();
    size_t floats = 0;
    for (size_t s : kTensorSizes) floats += s;
    std::printf("%zu replicas (%s ...), %zu tensors, %.2f MB of f32 gradients per replica\n",
                devices.size(), devices.front().name().c_str(), kTensorSizes.size(),
                floats * 4 / 1e6);
    std::printf("%-26s %12s %8s\n", "cross-device ops", "ms/step", "#wrong");
    int failures = 0;
    for (const auto& name : registry.CrossDeviceOpsNames()) {
      Result r;
      try {
        r = RunBackend(name, devices, steps, {{"num_packs", std::to_string(num_packs)}});
      } catch (const chorus::Error& e) {
        // A backend for other devices (nccl: CUDA GPUs) cannot run on these: say so, go on.
        if (e.status() != CHORUS_UNSUPPORTED && e.status() != CHORUS_UNAVAILABLE) throw;
        std::printf("%-26s %12s %8s  (skipped: %s)\n", name.c_str(), "-", "-",
                    chorus::StatusName(e.status()));
        continue;
      }
      std::printf("%-26s %12.3f %8zu\n", name.c_str(), r.ms_per_step, r.wrong);
      failures += r.wrong > 0;
    }
    return failures == 0 ? 0 : 1;
  } catch (const chorus::Error& e) {
    std::cerr << "compare_cross_device_ops: " << e.what() << "\n";
    return 2;
  }
}
