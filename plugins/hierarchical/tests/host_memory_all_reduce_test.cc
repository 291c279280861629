// hierarchical_copy on the core's cpu devices (host memory), where an all-reduce takes the fused,
// threaded path: its results must be the very bits of the hierarchical recipe (each half summed
// onto its root in order, then the two sums added), out of place and in place, for sizes below
// one chunk, across many chunks and threads (several MiB), and not a multiple of the chunk.
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace chorus {
namespace {

struct Replicas {
  std::shared_ptr<DeviceEnumerator> cpu;
  std::vector<Device> devices;
  std::vector<DeviceBuffer> inputs, outputs;
  Replicas(size_t n, size_t count) {
    cpu = DeviceEnumerator::Create(Registry::Global().FindPlugin("core"),
                                   {{"count", std::to_string(n)}});
    for (uint32_t i = 0; i < n; ++i) {
      devices.push_back({cpu, i});
      inputs.emplace_back(devices.back(), count * sizeof(float));
      outputs.emplace_back(devices.back(), count * sizeof(float));
    }
  }
  static std::vector<chorus_buffer> Views(const std::vector<DeviceBuffer>& buffers) {
    std::vector<chorus_buffer> views;
    for (const auto& b : buffers) views.push_back(b.buffer());
    return views;
  }
};

// The recipe for the first all-reduce of a call (roots A[0] and B[0]), element by element.
std::vector<float> Expected(const std::vector<std::vector<float>>& values) {
  const size_t n = values.size(), half = n / 2, count = values[0].size();
  std::vector<float> total(count);
  for (size_t i = 0; i < count; ++i) {
    float sum_b = values[half][i];
    for (size_t k = half + 1; k < n; ++k) sum_b = sum_b + values[k][i];
    if (half == 0) {
      total[i] = sum_b;
      continue;
    }
    float sum_a = values[0][i];
    for (size_t k = 1; k < half; ++k) sum_a = sum_a + values[k][i];
    total[i] = sum_a + sum_b;
  }
  return total;
}

class HostMemoryAllReduce : public ::testing::TestWithParam<std::tuple<size_t, size_t, bool>> {};

TEST_P(HostMemoryAllReduce, GivesTheBitsOfTheHierarchicalRecipe) {
  const auto [n, count, in_place] = GetParam();
  Replicas r(n, count);
  std::mt19937 random(static_cast<unsigned>(n * 1000003 + count));
  std::uniform_real_distribution<float> uniform(-1e3f, 1e3f);
  std::vector<std::vector<float>> values(n, std::vector<float>(count));
  for (size_t k = 0; k < n; ++k) {
    for (float& v : values[k]) v = uniform(random);
    r.inputs[k].CopyFromHost(values[k].data(), count * sizeof(float));
  }
  auto ops = CrossDeviceOps::Create(Registry::Global(), "hierarchical_copy", r.devices);
  const auto inputs = Replicas::Views(r.inputs);
  ops->Reduce(CHORUS_REDUCE_SUM,
              {CHORUS_F32, count, inputs, in_place ? inputs : Replicas::Views(r.outputs)});
  const std::vector<float> expected = Expected(values);
  std::vector<float> got(count);
  for (size_t k = 0; k < n; ++k) {
    (in_place ? r.inputs[k] : r.outputs[k]).CopyToHost(got.data(), count * sizeof(float));
    ASSERT_EQ(std::memcmp(got.data(), expected.data(), count * sizeof(float)), 0)
        << "replica " << k << " of " << n << ", " << count << " elements";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, HostMemoryAllReduce,
    ::testing::Combine(::testing::Values(size_t{2}, size_t{3}, size_t{4}, size_t{5}),
                       ::testing::Values(size_t{1}, size_t{8191}, size_t{3} * 1024 * 1024 + 5),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<HostMemoryAllReduce::ParamType>& info) {
      return "replicas" + std::to_string(std::get<0>(info.param)) + "_count" +
             std::to_string(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_in_place" : "");
    });

}  // namespace
}  // namespace chorus
