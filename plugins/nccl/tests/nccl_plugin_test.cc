// The nccl plugin on any machine: it loads, provides its three interfaces, and without a GPU
// enumerates zero devices and refuses NCCL objects with a message that says why.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/plugin_library.h>
#include <chorus/runtime/registry.h>
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu_count_for_tests.h"

namespace chorus {
namespace {

using ::testing::HasSubstr;

using test::GpuCount;

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

// Creates a one-rank nccl communicator on host memory with `timeout_ms`; returns the status
// (the communicator, if one was made, is destroyed).
chorus_status CreateOneRank(const PluginLibrary& plugin, int64_t timeout_ms) {
  auto store = MakeInProcessStore();
  CKvStore c_store(store);
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = 0;
  args.size = 1;
  args.store = c_store.get();
  args.timeout_ms = timeout_ms;
  chorus_communicator* comm = nullptr;
  const chorus_status status = plugin.collective()->create(&args, &comm);
  if (comm != nullptr) plugin.collective()->destroy(comm);
  return status;
}

// Every wait of an nccl communicator is bounded by its time-out, so none is refused on any machine.
TEST(NcclPlugin, ACommunicatorWithoutAPositiveTimeoutIsRefused) {
  auto plugin = LoadNccl();
  ASSERT_TRUE(plugin);
  EXPECT_EQ(CreateOneRank(*plugin, 0), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(plugin->LastError(), HasSubstr("timeout_ms is 0; give a positive time-out"));
}

// NCCL_COMM_BLOCKING would override the blocking mode the plugin's time-outs rely on.
TEST(NcclPlugin, NcclCommBlockingInTheEnvironmentIsRefusedByName) {
  auto plugin = LoadNccl();
  ASSERT_TRUE(plugin);
  setenv("NCCL_COMM_BLOCKING", "1", 1);
  const chorus_status status = CreateOneRank(*plugin, 1000);
  unsetenv("NCCL_COMM_BLOCKING");
  EXPECT_EQ(status, CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(plugin->LastError(), HasSubstr("NCCL_COMM_BLOCKING is set; unset it"));
}

}  // namespace
}  // namespace chorus
