// The core used from several threads at once, as MirroredStrategy's replica threads do (run
// under ThreadSanitizer by the tsan preset).
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace chorus {
namespace {

TEST(Threads, ConcurrentReducesOnSeparateOpsAndSharedRegistry) {
  LoaderOptions options;
  options.filter = "none";
  Registry registry(options);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto cpu = registry.CpuDevices();  // first use races on purpose
      auto mine = DeviceEnumerator::Create(registry.FindPlugin("core"), {{"count", "4"}});
      std::vector<Device> devices;
      for (uint32_t i = 0; i < 4; ++i) devices.push_back({mine, i});
      auto ops = CrossDeviceOps::Create(registry, "reduction_to_one_device", devices);
      std::vector<std::vector<double>> data(4, std::vector<double>(513));
      for (int round = 0; round < 20; ++round) {
        std::vector<chorus_buffer> views;
        for (uint32_t d = 0; d < 4; ++d) {
          for (auto& x : data[d]) x = d + t;
          views.push_back({d, data[d].data()});
        }
        ops->Reduce(CHORUS_REDUCE_SUM, {CHORUS_F64, 513, views, views});
        for (const auto& replica : data) {
          for (double x : replica) {
            if (x != 6.0 + 4 * t) return;
          }
        }
      }
      ok[t] = cpu != nullptr;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok, std::vector<int>(kThreads, 1));
}

}  // namespace
}  // namespace chorus
