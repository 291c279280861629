// TPUStrategy and InitializeTpuSystem over chorus's reference PJRT plugin (CTest runs this
// program with CHORUS_PJRT_PLUGIN=reference): the TPU system's devices and topology, of one host
// and of a host in a two-host slice, and a strategy whose replicas are the PJRT devices
// all-reducing (through the tpu plugin's compiled programs) and training a variable as
// MirroredStrategy does.
#include <chorus/chorus.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "replicated_step_check.h"

namespace chorus {
namespace {

constexpr int kDevices = 4;  // the reference plugin's default device_count

TEST(TpuSystem, InitializeFindsThePjrtDevicesAndTheirTopology) {
  const Topology topology = InitializeTpuSystem(TPUClusterResolver("local"));
  ASSERT_EQ(topology.devices.size(), static_cast<size_t>(kDevices));
  EXPECT_EQ(topology.num_tasks, 1);
  EXPECT_EQ(topology.num_tpus_per_task, kDevices);
  for (const Device& device : topology.devices) {
    EXPECT_EQ(device.enumerator->platform(), kPjrtPlatform);
  }
  // The reference plugin places device i at (i, 0, 0).
  EXPECT_EQ(topology.mesh_shape, (std::vector<int>{kDevices, 1, 1}));
  ASSERT_EQ(topology.device_coordinates.size(), static_cast<size_t>(kDevices));
  for (int i = 0; i < kDevices; ++i) {
    EXPECT_EQ(topology.device_coordinates[static_cast<size_t>(i)], (std::vector<int>{i, 0, 0}));
  }
}

// A slice of two hosts, seen from one: this host's devices, two tasks. (TPUStrategy over two
// hosts runs in tests/multiworker: TwoHostsOfTwoPjrtDevicesTrainToTheBitsOfMirroredWithFour.)
TEST(TpuSystem, ATwoHostSystemHasThisHostsDevicesAndTwoTasks) {
  const Topology topology =
      InitializeTpuSystem(TPUClusterResolver("grpc://10.0.0.1:8470,grpc://10.0.0.2:8470"));
  EXPECT_EQ(topology.num_tasks, 2);
  EXPECT_EQ(topology.num_tpus_per_task, kDevices);
  EXPECT_EQ(topology.devices.size(), static_cast<size_t>(kDevices));
}

// As the nccl plugin's MirroredStrategy test on GPUs (replicated_step_check.h).
TEST(TPUStrategy, ReplicasAreThePjrtDevicesAndAllReduceAndTrainAsMirrored) {
  TPUStrategy strategy(TPUClusterResolver("local"));
  EXPECT_EQ(strategy.name(), "TPUStrategy");
  ASSERT_EQ(strategy.num_replicas_in_sync(), kDevices);
  EXPECT_EQ(strategy.cross_device_ops().name(), "tpu");
  test::CheckAllReduceAndSgdStep(strategy, std::string(kPjrtPlatform));
}

}  // namespace
}  // namespace chorus
