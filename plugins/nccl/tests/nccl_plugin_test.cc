// The nccl plugin on any machine: it loads, provides its three interfaces, and without a GPU
// enumerates zero devices and refuses NCCL objects with a message that says why.
#include <chorus/communicator.h>
#include <chorus/cross_device_ops.h>
#include <chorus/device.h>
#include <chorus/error.h>
#include <chorus/kv_store.h>
#include <chorus/plugin_library.h>
#include <chorus/registry.h>
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chorus {
namespace {

using ::testing::HasSubstr;

int GpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::shared_ptr<PluginLibrary> LoadNccl() {
  std::string reason;
  auto plugin = PluginLibrary::Load(CHORUS_NCCL_PLUGIN_PATH, &reason);
  EXPECT_TRUE(plugin) << reason;
  return plugin;
}

TEST(NcclPlugin, LoadsAndProvidesDevicesOpsAndCollective) {
  auto plugin = LoadNccl();
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->name(), "nccl");
  ASSERT_NE(plugin->device_enumerator(), nullptr);
  EXPECT_STREQ(plugin->device_enumerator()->platform, "cuda");
  ASSERT_NE(plugin->cross_device_ops(), nullptr);
  EXPECT_STREQ(plugin->cross_device_ops()->name, "nccl");
  ASSERT_NE(plugin->collective(), nullptr);
  EXPECT_STREQ(plugin->collective()->name, "nccl");
}

TEST(NcclPlugin, EnumeratesTheMachinesGpus) {
  auto plugin = LoadNccl();
  ASSERT_TRUE(plugin);
  auto devices = DeviceEnumerator::Create(plugin);
  EXPECT_EQ(devices->count(), static_cast<uint32_t>(GpuCount()));
  for (uint32_t i = 0; i < devices->count(); ++i) {
    EXPECT_EQ(devices->info(i).kind, CHORUS_DEVICE_GPU);
    EXPECT_THAT(devices->info(i).name, HasSubstr("GPU:" + std::to_string(i)));
  }
}

TEST(NcclPlugin, WithoutAGpuTheNcclObjectsAreUnavailableAndSayWhy) {
  if (GpuCount() > 0) GTEST_SKIP() << "this machine has a GPU; the gpu tests cover it";
  Registry registry(LoaderOptions{{}, std::string(CHORUS_NCCL_PLUGIN_PATH)});
  auto plugin = registry.FindPlugin("nccl");
  ASSERT_TRUE(plugin);
  // Cross-device ops over the core's cpu devices: NCCL needs CUDA devices.
  auto cpu = DeviceEnumerator::Create(registry.FindPlugin("core"), {{"count", "2"}});
  try {
    CrossDeviceOps::Create(registry, "nccl", {Device{cpu, 0}, Device{cpu, 1}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_UNAVAILABLE) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("no CUDA device"));
  }
  // A communicator: the same.
  CommunicatorConfig config;
  config.store = MakeInProcessStore();
  try {
    Communicator::Create(registry, "nccl", config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_UNAVAILABLE) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("no CUDA device"));
  }
}

}  // namespace
}  // namespace chorus
