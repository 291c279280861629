// TPUStrategy and InitializeTpuSystem over chorus's reference PJRT plugin (CTest runs this
// program with CHORUS_PJRT_PLUGIN=reference): the TPU system's devices and topology, of one host
// and of a host in a two-host slice, and a strategy whose replicas are the PJRT devices
// all-reducing (through the tpu plugin's compiled programs) and training a variable as
// MirroredStrategy does.
#include <chorus/chorus.h>
#include <chorus/runtime/device_program.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "chorus-launch/ports.h"
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

// A slice of two hosts whose second host never comes: the first host (the leader) serves the
// job's store, its PJRT client waits there for the other client's devices, and
// InitializeTpuSystem ends within the job's time-out naming what did not come. (Two hosts that
// both come run in tests/multiworker: TwoHostsOfTwoPjrtDevicesTrainToTheBitsOfMirroredWithFour.)
TEST(TpuSystem, ATwoHostSystemWhoseOtherHostNeverComesEndsNamingIt) {
  ASSERT_EQ(setenv("CHORUS_TIMEOUT_SECONDS", "2", 1), 0);
  const std::vector<int> ports = launch::PickFreePorts(2);
  TPUClusterResolver resolver("grpc://127.0.0.1:" + std::to_string(ports[0]) +
                              ",grpc://127.0.0.1:" + std::to_string(ports[1]));
  ASSERT_EQ(resolver.task_id(), 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    InitializeTpuSystem(resolver);
    FAIL() << "a TPU system without its second host";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_UNAVAILABLE) << e.what();
    EXPECT_THAT(e.what(), testing::HasSubstr("reference_pjrt/devices/1")) << e.what();
    EXPECT_THAT(e.what(), testing::HasSubstr("TIMEOUT")) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  ShutdownTpuSystem();  // leaves the job; its server waits at most the time-out for the other
}

// ShutdownTpuSystem releases the device context (the PJRT client and its programs), but not
// while a strategy holds its devices; the next InitializeTpuSystem makes a new one.
TEST(TpuSystem, ShutdownReleasesThePjrtClientAndInitializeMakesANewOne) {
  std::weak_ptr<DeviceEnumerator> first;
  {
    const Topology topology = InitializeTpuSystem(TPUClusterResolver("local"));
    first = topology.devices.front().enumerator;
  }
  {
    TPUStrategy strategy(TPUClusterResolver("local"));
    try {
      ShutdownTpuSystem();
      FAIL() << "shut down under a live strategy";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), CHORUS_UNAVAILABLE);
      EXPECT_THAT(e.what(), testing::HasSubstr("still in use"));
    }
  }
  ShutdownTpuSystem();
  EXPECT_TRUE(first.expired());
  const Topology again = InitializeTpuSystem(TPUClusterResolver("local"));
  ASSERT_EQ(again.devices.size(), static_cast<size_t>(kDevices));
  TPUStrategy strategy(again);
  EXPECT_EQ(strategy.cross_device_ops().name(), "tpu");
}

// As the nccl plugin's MirroredStrategy test on GPUs (replicated_step_check.h).
TEST(TPUStrategy, ReplicasAreThePjrtDevicesAndAllReduceAndTrainAsMirrored) {
  TPUStrategy strategy(TPUClusterResolver("local"));
  EXPECT_EQ(strategy.name(), "TPUStrategy");
  ASSERT_EQ(strategy.num_replicas_in_sync(), kDevices);
  EXPECT_EQ(strategy.cross_device_ops().name(), "tpu");
  test::CheckAllReduceAndSgdStep(strategy, std::string(kPjrtPlatform));
}

// A step that all-reduces its input into a running total: @main(total, x) -> (total + sum(x),
// sum(x)), the sum over every replica inside the program.
std::string AccumulateProgram(int replicas) {
  std::string group;
  for (int r = 0; r < replicas; ++r) group += (r == 0 ? "" : ", ") + std::to_string(r);
  const std::string groups =
      "dense<[[" + group + "]]> : tensor<1x" + std::to_string(replicas) + "xi64>";
  return "module @accumulate attributes {mhlo.num_replicas = " + std::to_string(replicas) +
         " : i32, mhlo.num_partitions = 1 : i32} {\n"
         "  func.func public @main(%total: tensor<2x3xf32>, %x: tensor<2x3xf32>) -> "
         "(tensor<2x3xf32>, tensor<2x3xf32>) {\n"
         "    %sum = \"stablehlo.all_reduce\"(%x) ({\n"
         "    ^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):\n"
         "      %added = \"stablehlo.add\"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> "
         "tensor<f32>\n"
         "      \"stablehlo.return\"(%added) : (tensor<f32>) -> ()\n"
         "    }) {replica_groups = " +
         groups +
         "} : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
         "    %new_total = \"stablehlo.add\"(%total, %sum) : (tensor<2x3xf32>, tensor<2x3xf32>) "
         "-> tensor<2x3xf32>\n"
         "    \"func.return\"(%new_total, %sum) : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()\n"
         "  }\n"
         "}\n";
}

std::vector<float> Filled(float value) { return std::vector<float>(6, value); }

// Step s's input on replica r: every element s * 10 + r.
std::vector<std::vector<PerReplica>> AccumulateInputs(const TPUStrategy& strategy, int steps) {
  std::vector<std::vector<PerReplica>> inputs(static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    std::vector<Tensor> values;
    for (size_t r = 0; r < strategy.devices().size(); ++r) {
      values.push_back(Tensor::FromVector(
          strategy.devices()[r], {2, 3}, Filled(static_cast<float>(s * 10 + static_cast<int>(r)))));
    }
    inputs[static_cast<size_t>(s)].push_back(PerReplica(std::move(values)));
  }
  return inputs;
}

Variable CreateTotal(TPUStrategy& strategy, float initial) {
  auto scope = strategy.scope();
  return Variable::Create({"total"}, {2, 3}, Filled(initial));
}

// Three steps per dispatch: the total carried from step to step on every replica, each step's
// output kept, all in one program run.
TEST(TPUStrategyCompiledStep, RunsStepsPerExecutionStepsPerDispatchWithTheAllReduceInside) {
  TPUStrategy strategy(TPUClusterResolver("local"));
  ReplicaProgram program;
  program.stablehlo = AccumulateProgram(kDevices);
  program.num_parameters = 1;
  program.steps_per_execution = 3;
  program.output_dtypes = {CHORUS_F32};
  const CompiledStep step = strategy.Compile(program);
  EXPECT_EQ(step.parameter_bytes(), (std::vector<uint64_t>{24}));
  EXPECT_EQ(step.input_bytes(), (std::vector<uint64_t>{24}));
  EXPECT_EQ(step.output_bytes(), (std::vector<uint64_t>{24}));
  Variable total = CreateTotal(strategy, 1.0f);
  const auto outputs = strategy.run(step, {total}, AccumulateInputs(strategy, 3));
  ASSERT_EQ(outputs.size(), 3u);
  float expected_total = 1.0f;
  for (int s = 0; s < 3; ++s) {
    // sum over replicas of s * 10 + r = 4 * 10 * s + (0 + 1 + 2 + 3).
    const float sum = static_cast<float>(kDevices * 10 * s + 6);
    expected_total += sum;
    ASSERT_EQ(outputs[static_cast<size_t>(s)].size(), 1u);
    for (const Tensor& value : outputs[static_cast<size_t>(s)][0].values()) {
      EXPECT_EQ(value.dtype(), CHORUS_F32);
      EXPECT_EQ(value.ToVector(), Filled(sum)) << "step " << s;
    }
  }
  for (const Tensor& copy : total.components()) EXPECT_EQ(copy.ToVector(), Filled(expected_total));
  // A second dispatch goes on from the carried total.
  strategy.run(step, {total}, AccumulateInputs(strategy, 3));
  for (const Tensor& copy : total.components()) {
    EXPECT_EQ(copy.ToVector(), Filled(2 * expected_total - 1.0f));
  }
}

TEST(TPUStrategyCompiledStep, InputsOnTheHostAreCopiedToTheReplicas) {
  TPUStrategy strategy(TPUClusterResolver("local"));
  ReplicaProgram program;
  program.stablehlo = AccumulateProgram(kDevices);
  program.num_parameters = 1;
  const CompiledStep step = strategy.Compile(program);
  Variable total = CreateTotal(strategy, 0.0f);
  auto cpu = Registry::Global().DefaultDevices();
  std::vector<Tensor> values;
  for (int r = 0; r < kDevices; ++r)
    values.push_back(Tensor::FromVector(cpu.front(), {2, 3}, Filled(1)));
  const auto outputs = strategy.run(step, {total}, {{PerReplica(std::move(values))}});
  // Untyped outputs come back as their bytes.
  EXPECT_EQ(outputs[0][0][0].dtype(), CHORUS_U8);
  EXPECT_EQ(outputs[0][0][0].num_elements(), 24);
  for (const Tensor& copy : total.components()) EXPECT_EQ(copy.ToVector(), Filled(kDevices));
}

TEST(TPUStrategyCompiledStep, WrongParametersAndInputsAreNamed) {
  TPUStrategy strategy(TPUClusterResolver("local"));
  ReplicaProgram program;
  program.stablehlo = AccumulateProgram(kDevices);
  program.num_parameters = 1;
  program.steps_per_execution = 2;
  const CompiledStep step = strategy.Compile(program);
  Variable total = CreateTotal(strategy, 0.0f);
  auto message = [&](const std::vector<Variable>& parameters,
                     const std::vector<std::vector<PerReplica>>& inputs) {
    try {
      strategy.run(step, parameters, inputs);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({}, AccumulateInputs(strategy, 2)),
              testing::HasSubstr("0 parameters for a step of 1"));
  EXPECT_THAT(message({total}, AccumulateInputs(strategy, 1)),
              testing::HasSubstr("inputs for 1 steps; the step runs 2 per dispatch"));
  Variable plain = Variable::Create({"plain"}, {2, 3}, Filled(0));
  EXPECT_THAT(message({plain}, AccumulateInputs(strategy, 2)),
              testing::HasSubstr("is not a variable of this strategy"));
  auto inputs = AccumulateInputs(strategy, 2);
  std::vector<Tensor> small;
  for (const Device& device : strategy.devices())
    small.push_back(Tensor::FromVector(device, {2}, {1, 2}));
  inputs[1][0] = PerReplica(std::move(small));
  EXPECT_THAT(
      message({total}, inputs),
      testing::HasSubstr("input 0 of step 1 on replica 0 has 8 bytes; the program takes 24"));
}

TEST(TPUStrategyCompiledStep, AProgramThePluginCannotRunIsRefusedNamingItsLine) {
  TPUStrategy strategy(TPUClusterResolver("local"));
  ReplicaProgram program;
  program.stablehlo = AccumulateProgram(kDevices);
  const std::string add = "\"stablehlo.add\"(%total, %sum)";
  program.stablehlo.replace(program.stablehlo.find(add), add.size(),
                            "\"stablehlo.atan2\"(%total, %sum)");
  program.num_parameters = 1;
  try {
    strategy.Compile(program);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("stablehlo.atan2"));
    EXPECT_THAT(e.what(), testing::HasSubstr("line"));
  }
  program.stablehlo = "module @m {\n}\n";
  try {
    strategy.Compile(program);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("no `func.func public @main("));
  }
}

// Replicas on devices 3 and 1 (by coordinates): the all-reduces of the strategy and of a
// compiled step run on them as programs with that device assignment.
TEST(TPUStrategy, ADeviceAssignmentPicksTheReplicasDevicesInItsOrder) {
  const TPUClusterResolver resolver("local");
  const Topology topology = InitializeTpuSystem(resolver);
  const DeviceAssignment assignment(topology, {{3, 0, 0}, {1, 0, 0}});
  EXPECT_EQ(assignment.num_replicas(), 2);
  EXPECT_EQ(assignment.num_cores_per_replica(), 1);
  EXPECT_EQ(assignment.coordinates(1), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(assignment.tpu_ordinal(0), 3);
  TPUStrategy strategy(resolver, assignment);
  ASSERT_EQ(strategy.num_replicas_in_sync(), 2);
  EXPECT_EQ(strategy.devices()[0], topology.devices[3]);
  EXPECT_EQ(strategy.devices()[1], topology.devices[1]);
  test::CheckAllReduceAndSgdStep(strategy, std::string(kPjrtPlatform));

  ReplicaProgram program;
  program.stablehlo = AccumulateProgram(2);
  program.num_parameters = 1;
  program.steps_per_execution = 2;
  program.output_dtypes = {CHORUS_F32};
  const CompiledStep step = strategy.Compile(program);
  Variable total = CreateTotal(strategy, 0.0f);
  const auto outputs = strategy.run(step, {total}, AccumulateInputs(strategy, 2));
  // Step s: replicas hold s * 10 + r, so the sum is 20 s + 1.
  EXPECT_EQ(outputs[1][0][0].ToVector(), Filled(21));
  for (const Tensor& copy : total.components()) EXPECT_EQ(copy.ToVector(), Filled(1 + 21));
}

TEST(TPUStrategy, ADeviceAssignmentOfNoDeviceOrOneDeviceTwiceIsRefused) {
  const Topology topology = InitializeTpuSystem(TPUClusterResolver("local"));
  auto message = [&](const std::vector<std::vector<int>>& cores) {
    try {
      DeviceAssignment assignment(topology, cores);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({{9, 0, 0}}), testing::HasSubstr("replica 0 is at (9,0,0), where the "
                                                       "topology has no device"));
  EXPECT_THAT(message({{1, 0, 0}, {1, 0, 0}}), testing::HasSubstr("given to two replicas"));
  EXPECT_THAT(message({}), testing::HasSubstr("no replicas"));
  EXPECT_EQ(DeviceAssignment::Build(topology, 2).devices(),
            (std::vector<Device>{topology.devices[0], topology.devices[1]}));
  EXPECT_THROW(DeviceAssignment::Build(topology, 5), Error);
}

// Through DeviceProgram directly: a carried value written to another allocation leaves its
// argument intact (not donated); written over its argument (as TPUStrategy::run does with the
// parameters) it runs the donating program, and the allocation holds the new value.
TEST(TPUStrategyCompiledStep, ACarriedArgumentIsDonatedOnlyWhenItsResultOverwritesIt) {
  const Topology topology = InitializeTpuSystem(TPUClusterResolver("local"));
  const std::vector<Device> devices(topology.devices.begin(), topology.devices.begin() + 2);
  const std::unique_ptr<DeviceProgram> program =
      DeviceProgram::Compile(devices, "stablehlo", AccumulateProgram(2), 1, 1);
  std::vector<Tensor> totals, inputs, elsewhere, outputs;
  for (size_t r = 0; r < devices.size(); ++r) {
    totals.push_back(Tensor::FromVector(devices[r], {2, 3}, Filled(5)));
    inputs.push_back(Tensor::FromVector(devices[r], {2, 3}, Filled(static_cast<float>(r + 1))));
    elsewhere.push_back(Tensor(devices[r], CHORUS_F32, {2, 3}));
    outputs.push_back(Tensor(devices[r], CHORUS_F32, {2, 3}));
  }
  auto run = [&](const std::vector<Tensor>& into) {
    std::vector<std::vector<void*>> arguments, results;
    for (size_t r = 0; r < devices.size(); ++r) {
      arguments.push_back({totals[r].raw(), inputs[r].raw()});
      results.push_back({into[r].raw(), outputs[r].raw()});
    }
    program->Execute(arguments, results, std::chrono::seconds(60));
  };
  run(elsewhere);
  for (size_t r = 0; r < devices.size(); ++r) {
    EXPECT_EQ(totals[r].ToVector(), Filled(5)) << "the argument was donated to another allocation";
    EXPECT_EQ(elsewhere[r].ToVector(), Filled(8));
    EXPECT_EQ(outputs[r].ToVector(), Filled(3));
  }
  run(totals);
  run(totals);
  for (size_t r = 0; r < devices.size(); ++r) EXPECT_EQ(totals[r].ToVector(), Filled(11));
}

TEST(TPUStrategyCompiledStep, DevicesThatRunNoProgramsAreUnsupported) {
  Topology topology;
  topology.devices = Registry::Global().DefaultDevices();
  TPUStrategy strategy(std::move(topology));
  ReplicaProgram program;
  program.stablehlo = AccumulateProgram(1);
  try {
    strategy.Compile(program);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_UNSUPPORTED);
    EXPECT_THAT(e.what(), testing::HasSubstr("do not run compiled programs"));
  }
}

}  // namespace
}  // namespace chorus
