#include "stream_bandwidth.h"

#include <chrono>
#include <vector>

#include "metrics.h"

namespace chorus::bench {

namespace {

// Not inlined into the timing loop, so the compiler cannot merge passes.
[[gnu::noinline]] void AddInto(float* a, const float* b, size_t count) {
  for (size_t i = 0; i < count; ++i) a[i] += b[i];
}

}  // namespace

StreamBandwidth MeasureStreamBandwidth(uint64_t array_bytes, int passes) {
  const size_t count = static_cast<size_t>(array_bytes / sizeof(float));
  std::vector<float> a(count, 1.0f), b(count, 0.0f);  // adding 0 keeps every value finite
  std::vector<double> times;
  AddInto(a.data(), b.data(), count);  // warm-up: pages faulted in
  for (int p = 0; p < passes; ++p) {
    const auto start = std::chrono::steady_clock::now();
    AddInto(a.data(), b.data(), count);
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    times.push_back(elapsed.count());
  }
  StreamBandwidth result;
  result.array_bytes = count * sizeof(float);
  result.time_us = Median(times);
  result.gbps = AlgorithmBandwidthGbps(3 * result.array_bytes, result.time_us);
  return result;
}

}  // namespace chorus::bench
