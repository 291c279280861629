// The "tpu" cross-device ops of libchorus-tpu.so over chorus's reference PJRT plugin, through the
// core: every operation one compiled program, compiled once per shape (counted by the reference
// plugin), with the bits of the core's host path (reduction_to_one_device on cpu devices); and
// the host path taken where a program cannot run (slices, replicas that are not the client's
// first devices, gathers of unequal parts); the enumerator's kernels as one-device programs.
#include <chorus/chorus.h>
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reference_devices.h"

namespace chorus::tpu {
namespace {

using test::ReferenceDevices;
using test::TpuRegistry;

// Programs the reference PJRT plugin has compiled in this process.
uint64_t ProgramsCompiled() {
  void* library = dlopen(CHORUS_PJRT_REFERENCE_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return 0;  // not loaded yet: nothing compiled
  auto* count =
      reinterpret_cast<uint64_t (*)()>(dlsym(library, "chorus_reference_pjrt_compile_count"));
  dlclose(library);
  return count == nullptr ? 0 : count();
}

// Values whose sums depend on the association (magnitudes far apart), in range for every dtype.
std::vector<unsigned char> Values(chorus_dtype dtype, size_t count, size_t replica) {
  std::vector<unsigned char> out(count * chorus_dtype_size(dtype));
  const bool floating =
      dtype == CHORUS_F32 || dtype == CHORUS_F64 || dtype == CHORUS_F16 || dtype == CHORUS_BF16;
  for (size_t k = 0; k < count; ++k) {
    const size_t mix = k * 7919 + replica * 104729;
    const double v = floating ? (static_cast<double>(mix % 97) - 48) * (replica % 2 ? 3.3 : 1e-3)
                     : dtype == CHORUS_U8 ? static_cast<double>(mix % 5)
                                          : static_cast<double>(mix % 5) - 2;
    sdk::StoreElement(out.data(), k, dtype, v);
  }
  return out;
}

// Buffers of `count` elements on every device of `devices`, one allocation each.
struct Replicas {
  std::shared_ptr<DeviceEnumerator> devices;
  std::vector<void*> buffers;
  size_t bytes = 0;
  Replicas(std::shared_ptr<DeviceEnumerator> d, size_t b) : devices(std::move(d)), bytes(b) {
    for (uint32_t i = 0; i < devices->count(); ++i) buffers.push_back(devices->Allocate(i, bytes));
  }
  ~Replicas() {
    for (uint32_t i = 0; i < buffers.size(); ++i) devices->Deallocate(i, buffers[i]);
  }
  void Write(uint32_t i, const std::vector<unsigned char>& host) {
    devices->Copy(i, buffers[i], CHORUS_HOST_DEVICE, host.data(), bytes);
  }
  std::vector<unsigned char> Read(uint32_t i) const {
    std::vector<unsigned char> host(bytes);
    devices->Copy(CHORUS_HOST_DEVICE, host.data(), i, buffers[i], bytes);
    return host;
  }
};

std::vector<Device> All(const std::shared_ptr<DeviceEnumerator>& devices) {
  std::vector<Device> replicas;
  for (uint32_t i = 0; i < devices->count(); ++i) replicas.push_back({devices, i});
  return replicas;
}

// The all-reduce of `inputs` as the core's host path computes it.
std::vector<unsigned char> HostPath(const std::vector<std::vector<unsigned char>>& inputs,
                                    chorus_dtype dtype, chorus_reduce_op op, size_t count) {
  auto cpu = DeviceEnumerator::Create(TpuRegistry().FindPlugin("core"),
                                      {{"count", std::to_string(inputs.size())}});
  std::vector<std::vector<unsigned char>> buffers = inputs;
  auto ops = CrossDeviceOps::Create(TpuRegistry(), "reduction_to_one_device", All(cpu));
  ReduceSpec spec;
  spec.dtype = dtype;
  spec.count = count;
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    spec.inputs.push_back({i, buffers[i].data()});
    spec.outputs.push_back({i, buffers[i].data()});
  }
  ops->Reduce(op, spec);
  return buffers[0];
}

TEST(TpuCrossDeviceOps, AutoPicksThemOnThePjrtDevices) {
  chorus::test::ScopedVariable unset("CHORUS_CROSS_DEVICE_OPS", nullptr);
  const CrossDeviceOpsSelection selection =
      SelectCrossDeviceOps(TpuRegistry(), "", All(ReferenceDevices(2)));
  EXPECT_EQ(selection.name, "tpu") << selection.source;
  EXPECT_EQ(selection.names, std::vector<std::string>{"tpu"}) << "no other serves some size better";
}

// Every dtype and op, in place and out of place, 1 to 4 replicas: the bits of the host path, and
// a second call with the same shapes compiles nothing.
TEST(TpuCrossDeviceOps, AllReduceIsAProgramWithTheBitsOfTheHostPath) {
  for (int n : {1, 2, 3, 4}) {
    auto devices = ReferenceDevices(n);
    auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", All(devices));
    for (int d = 0; d < CHORUS_DTYPE_COUNT; ++d) {
      const auto dtype = static_cast<chorus_dtype>(d);
      for (int o = CHORUS_REDUCE_SUM; o <= CHORUS_REDUCE_MAX; ++o) {
        const auto op = static_cast<chorus_reduce_op>(o);
        for (size_t count : {size_t{1}, size_t{1001}}) {
          SCOPED_TRACE(std::to_string(n) + " replicas, " + DtypeName(dtype) + " " +
                       ReduceOpName(op) + ", " + std::to_string(count) + " elements");
          std::vector<std::vector<unsigned char>> inputs;
          for (int r = 0; r < n; ++r)
            inputs.push_back(Values(dtype, count, static_cast<size_t>(r)));
          const std::vector<unsigned char> expected = HostPath(inputs, dtype, op, count);
          const size_t bytes = count * chorus_dtype_size(dtype);
          Replicas in(devices, bytes), out(devices, bytes);
          ReduceSpec in_place{dtype, count, {}, {}}, out_of_place{dtype, count, {}, {}};
          for (uint32_t i = 0; i < devices->count(); ++i) {
            in.Write(i, inputs[i]);
            in_place.inputs.push_back({i, in.buffers[i]});
            in_place.outputs.push_back({i, in.buffers[i]});
            out_of_place.inputs.push_back({i, in.buffers[i]});
            out_of_place.outputs.push_back({i, out.buffers[i]});
          }
          const uint64_t before = ProgramsCompiled();
          ops->Reduce(op, out_of_place);
          const uint64_t first = ProgramsCompiled();
          EXPECT_EQ(first, before + 1) << "one program for one operation";
          ops->Reduce(op, out_of_place);
          EXPECT_EQ(ProgramsCompiled(), first) << "the same shapes compiled again";
          for (uint32_t i = 0; i < devices->count(); ++i) {
            EXPECT_EQ(out.Read(i), expected) << "out of place, replica " << i;
            EXPECT_EQ(in.Read(i), inputs[i]) << "an input of an out-of-place reduce changed";
          }
          ops->Reduce(op, in_place);  // another program: it donates its arguments
          EXPECT_EQ(ProgramsCompiled(), first + 1);
          for (uint32_t i = 0; i < devices->count(); ++i) {
            EXPECT_EQ(in.Read(i), expected) << "in place, replica " << i;
          }
        }
      }
    }
  }
}

// Every dtype and op, 1 to 4 replicas, sizes 0, 1 and odd: replica j gets part j of the host
// path's all-reduce, bit for bit, from one program compiled once; outputs on other devices than
// their inputs take the host path to the same bits; MEAN divides by the replicas.
TEST(TpuCrossDeviceOps, ReduceScatterIsAProgramWithTheBitsOfTheHostPathsParts) {
  for (int n : {1, 2, 3, 4}) {
    auto devices = ReferenceDevices(n);
    auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", All(devices));
    for (int d = 0; d < CHORUS_DTYPE_COUNT; ++d) {
      const auto dtype = static_cast<chorus_dtype>(d);
      for (int o = CHORUS_REDUCE_SUM; o <= CHORUS_REDUCE_MAX; ++o) {
        const auto op = static_cast<chorus_reduce_op>(o);
        for (size_t count : {size_t{0}, size_t{1}, size_t{333}}) {
          SCOPED_TRACE(std::to_string(n) + " replicas, " + DtypeName(dtype) + " " +
                       ReduceOpName(op) + ", " + std::to_string(count) + " elements per part");
          const size_t element = chorus_dtype_size(dtype);
          const size_t whole = count * static_cast<size_t>(n);
          std::vector<std::vector<unsigned char>> inputs;
          for (int r = 0; r < n; ++r) {
            inputs.push_back(Values(dtype, whole, static_cast<size_t>(r)));
          }
          Replicas in(devices, std::max<size_t>(whole * element, 1));
          Replicas out(devices, std::max<size_t>(count * element, 1));
          std::vector<chorus_buffer> ins, outs, shifted;
          for (uint32_t i = 0; i < devices->count(); ++i) {
            if (whole > 0) in.Write(i, inputs[i]);
            ins.push_back({i, in.buffers[i]});
            outs.push_back({i, out.buffers[i]});
            // Output j on the next replica's device: no program maps it, the host path runs.
            const uint32_t next = (i + 1) % devices->count();
            shifted.push_back({next, out.buffers[next]});
          }
          const uint64_t before = ProgramsCompiled();
          ops->ReduceScatter(op, dtype, count, ins, outs);
          ops->ReduceScatter(op, dtype, count, ins, outs);
          EXPECT_EQ(ProgramsCompiled(), before + (count > 0 ? 1 : 0))
              << "one program, compiled once";
          if (count == 0) continue;
          const std::vector<unsigned char> sum = HostPath(inputs, dtype, op, whole);
          auto part = [&](size_t j) {
            return std::vector<unsigned char>(sum.begin() + j * count * element,
                                              sum.begin() + (j + 1) * count * element);
          };
          for (uint32_t j = 0; j < devices->count(); ++j) {
            EXPECT_EQ(out.Read(j), part(j)) << "program, replica " << j;
            EXPECT_EQ(in.Read(j), inputs[j]) << "an input changed";
          }
          if (n > 1) {
            ops->ReduceScatter(op, dtype, count, ins, shifted);
            for (uint32_t j = 0; j < devices->count(); ++j) {
              EXPECT_EQ(out.Read((j + 1) % devices->count()), part(j)) << "host path, part " << j;
            }
          }
        }
      }
    }
  }
  // MEAN: a SUM divided by the replicas.
  auto devices = ReferenceDevices(4);
  auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", All(devices));
  Replicas in(devices, 8 * sizeof(float)), out(devices, 2 * sizeof(float));
  std::vector<chorus_buffer> ins, outs;
  for (uint32_t i = 0; i < 4; ++i) {
    std::vector<float> values(8);
    for (size_t k = 0; k < 8; ++k) values[k] = static_cast<float>(k + 8 * i);
    std::vector<unsigned char> bytes(sizeof(float) * 8);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    in.Write(i, bytes);
    ins.push_back({i, in.buffers[i]});
    outs.push_back({i, out.buffers[i]});
  }
  ops->ReduceScatter(CHORUS_REDUCE_MEAN, CHORUS_F32, 2, ins, outs);
  for (uint32_t j = 0; j < 4; ++j) {
    float got[2];
    const std::vector<unsigned char> bytes = out.Read(j);
    std::memcpy(got, bytes.data(), sizeof got);
    // Element k of the sum is 4k + 8(0+1+2+3) = 4k + 48; its mean k + 12.
    EXPECT_EQ(got[0], static_cast<float>(2 * j + 12));
    EXPECT_EQ(got[1], static_cast<float>(2 * j + 13));
  }
}

TEST(TpuCrossDeviceOps, ALargeAllReduceAndAReduceToOneDevice) {
  constexpr size_t kCount = 262147;
  auto devices = ReferenceDevices(4);
  auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", All(devices));
  std::vector<std::vector<unsigned char>> inputs;
  for (size_t r = 0; r < 4; ++r) inputs.push_back(Values(CHORUS_F32, kCount, r));
  const auto expected = HostPath(inputs, CHORUS_F32, CHORUS_REDUCE_SUM, kCount);
  Replicas in(devices, kCount * 4);
  ReduceSpec spec{CHORUS_F32, kCount, {}, {}};
  for (uint32_t i = 0; i < 4; ++i) {
    in.Write(i, inputs[i]);
    spec.inputs.push_back({i, in.buffers[i]});
  }
  void* target = devices->Allocate(2, kCount * 4);
  spec.outputs.push_back({2, target});
  const uint64_t before = ProgramsCompiled();
  ops->Reduce(CHORUS_REDUCE_SUM, spec);
  EXPECT_EQ(ProgramsCompiled(), before + 1);
  std::vector<unsigned char> got(kCount * 4);
  devices->Copy(CHORUS_HOST_DEVICE, got.data(), 2, target, got.size());
  EXPECT_EQ(got, expected);
  devices->Deallocate(2, target);
}

// A batch of reduces of several dtypes and sizes is one program.
TEST(TpuCrossDeviceOps, ABatchReduceIsOneProgram) {
  auto devices = ReferenceDevices(3);
  auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", All(devices));
  const std::vector<std::pair<chorus_dtype, size_t>> shapes = {
      {CHORUS_F32, 10}, {CHORUS_BF16, 7}, {CHORUS_I64, 3}, {CHORUS_F32, 10}};
  std::vector<std::unique_ptr<Replicas>> buffers;
  std::vector<ReduceSpec> specs;
  std::vector<std::vector<unsigned char>> expected;
  for (size_t s = 0; s < shapes.size(); ++s) {
    const auto [dtype, count] = shapes[s];
    buffers.push_back(std::make_unique<Replicas>(devices, count * chorus_dtype_size(dtype)));
    std::vector<std::vector<unsigned char>> inputs;
    ReduceSpec spec{dtype, count, {}, {}};
    for (uint32_t i = 0; i < 3; ++i) {
      inputs.push_back(Values(dtype, count, i + s));
      buffers.back()->Write(i, inputs.back());
      spec.inputs.push_back({i, buffers.back()->buffers[i]});
      spec.outputs.push_back({i, buffers.back()->buffers[i]});
    }
    expected.push_back(HostPath(inputs, dtype, CHORUS_REDUCE_SUM, count));
    specs.push_back(spec);
  }
  const uint64_t before = ProgramsCompiled();
  ops->BatchReduce(CHORUS_REDUCE_SUM, specs);
  EXPECT_EQ(ProgramsCompiled(), before + 1) << "a batch is one program";
  for (size_t s = 0; s < shapes.size(); ++s) {
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(buffers[s]->Read(i), expected[s]) << "reduce " << s;
  }
}

TEST(TpuCrossDeviceOps, BroadcastFromEveryReplicaIsAProgram) {
  auto devices = ReferenceDevices(3);
  auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", All(devices));
  constexpr size_t kCount = 1001;
  Replicas buffers(devices, kCount * 2);
  for (uint32_t source = 0; source < 3; ++source) {
    const std::vector<unsigned char> value = Values(CHORUS_F16, kCount, source);
    for (uint32_t i = 0; i < 3; ++i) buffers.Write(i, Values(CHORUS_F16, kCount, 10 + i));
    buffers.Write(source, value);
    std::vector<chorus_buffer> outputs;
    for (uint32_t i = 0; i < 3; ++i) outputs.push_back({i, buffers.buffers[i]});
    const uint64_t before = ProgramsCompiled();
    ops->Broadcast(CHORUS_F16, kCount, {source, buffers.buffers[source]}, outputs);
    EXPECT_EQ(ProgramsCompiled(), before + 1) << "one program per source";
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(buffers.Read(i), value) << "from " << source;
  }
}

TEST(TpuCrossDeviceOps, AllGatherOfEqualPartsIsAProgramAndOfUnequalPartsRunsOnTheHost) {
  auto devices = ReferenceDevices(3);
  auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", All(devices));
  for (const std::vector<size_t>& counts :
       {std::vector<size_t>{5, 5, 5}, std::vector<size_t>{2, 0, 7}}) {
    size_t total = 0;
    for (size_t c : counts) total += c;
    std::vector<void*> inputs, outputs;
    std::vector<chorus_buffer> in, out;
    std::vector<unsigned char> expected;
    for (uint32_t i = 0; i < 3; ++i) {
      const auto value = Values(CHORUS_I32, counts[i], i);
      expected.insert(expected.end(), value.begin(), value.end());
      inputs.push_back(devices->Allocate(i, value.size()));
      if (!value.empty())
        devices->Copy(i, inputs[i], CHORUS_HOST_DEVICE, value.data(), value.size());
      outputs.push_back(devices->Allocate(i, total * 4));
      in.push_back({i, inputs[i]});
      out.push_back({i, outputs[i]});
    }
    const uint64_t before = ProgramsCompiled();
    ops->AllGather(CHORUS_I32, in, counts, out);
    EXPECT_EQ(ProgramsCompiled(), before + (counts[0] == counts[1] ? 1 : 0));
    for (uint32_t i = 0; i < 3; ++i) {
      std::vector<unsigned char> got(total * 4);
      devices->Copy(CHORUS_HOST_DEVICE, got.data(), i, outputs[i], got.size());
      EXPECT_EQ(got, expected) << "replica " << i;
      devices->Deallocate(i, inputs[i]);
      devices->Deallocate(i, outputs[i]);
    }
  }
}

// Parts of allocations, and replicas that are not the client's first devices, run on the host:
// the same results, no program.
// Replicas on other devices than the client's first run as a program with a device assignment
// in its compile options; slices of allocations run on the host; both with the host path's bits.
TEST(TpuCrossDeviceOps, OtherDevicesRunAsAssignedProgramsAndSlicesOnTheHost) {
  constexpr size_t kCount = 333;
  auto devices = ReferenceDevices(3);
  std::vector<std::vector<unsigned char>> inputs;
  for (size_t r = 0; r < 2; ++r) inputs.push_back(Values(CHORUS_F32, kCount, r));
  const auto expected = HostPath(inputs, CHORUS_F32, CHORUS_REDUCE_SUM, kCount);
  // Devices 1 and 2 of 3, then the same two in the other order (replica 0 on device 2).
  for (const std::vector<uint32_t>& order : {std::vector<uint32_t>{1, 2}, {2, 1}}) {
    auto ops =
        CrossDeviceOps::Create(TpuRegistry(), "tpu", {{devices, order[0]}, {devices, order[1]}});
    Replicas buffers(devices, kCount * 4);
    buffers.Write(order[0], inputs[0]);
    buffers.Write(order[1], inputs[1]);
    ReduceSpec spec{CHORUS_F32,
                    kCount,
                    {{order[0], buffers.buffers[order[0]]}, {order[1], buffers.buffers[order[1]]}},
                    {{order[0], buffers.buffers[order[0]]}, {order[1], buffers.buffers[order[1]]}}};
    const uint64_t before = ProgramsCompiled();
    ops->Reduce(CHORUS_REDUCE_SUM, spec);
    EXPECT_EQ(ProgramsCompiled(), before + 1) << "devices " << order[0] << ", " << order[1];
    EXPECT_EQ(buffers.Read(order[0]), expected);
    EXPECT_EQ(buffers.Read(order[1]), expected);
    ops->Reduce(CHORUS_REDUCE_SUM, spec);
    EXPECT_EQ(ProgramsCompiled(), before + 1) << "a second call compiled again";
  }
  {
    // The second half of larger allocations on devices 0 and 1.
    auto ops = CrossDeviceOps::Create(TpuRegistry(), "tpu", {{devices, 0}, {devices, 1}});
    Replicas buffers(devices, 2 * kCount * 4);
    ReduceSpec spec{CHORUS_F32, kCount, {}, {}};
    for (uint32_t i = 0; i < 2; ++i) {
      void* half = static_cast<char*>(buffers.buffers[i]) + kCount * 4;
      devices->Copy(i, half, CHORUS_HOST_DEVICE, inputs[i].data(), kCount * 4);
      spec.inputs.push_back({i, half});
      spec.outputs.push_back({i, half});
    }
    const uint64_t before = ProgramsCompiled();
    ops->Reduce(CHORUS_REDUCE_SUM, spec);
    EXPECT_EQ(ProgramsCompiled(), before);
    for (uint32_t i = 0; i < 2; ++i) {
      std::vector<unsigned char> got = buffers.Read(i);
      EXPECT_EQ(std::vector<unsigned char>(got.begin() + kCount * 4, got.end()), expected);
      EXPECT_EQ(std::vector<unsigned char>(got.begin(), got.begin() + kCount * 4),
                std::vector<unsigned char>(kCount * 4, 0))
          << "the first half, never written, changed";
    }
  }
}

// The enumerator's kernels on whole allocations are one-device programs run on the device they
// are given, compiled once per dtype, op and size; on parts of allocations they run on the host.
TEST(TpuKernels, WholeAllocationsRunAsProgramsCompiledOnceAndPartsOnTheHost) {
  constexpr size_t kCount = 1001;
  constexpr size_t kBytes = kCount * sizeof(float);
  auto devices = ReferenceDevices(2);
  auto cpu = DeviceEnumerator::Create(TpuRegistry().FindPlugin("core"), {{"count", "1"}});
  const auto a = Values(CHORUS_F32, kCount, 1), b = Values(CHORUS_F32, kCount, 2);
  void* x = devices->Allocate(1, kBytes);
  void* y = devices->Allocate(1, kBytes);
  void* z = devices->Allocate(1, kBytes);
  devices->Copy(1, x, CHORUS_HOST_DEVICE, a.data(), kBytes);
  devices->Copy(1, y, CHORUS_HOST_DEVICE, b.data(), kBytes);
  auto read = [&](uint32_t device, const void* p) {
    std::vector<unsigned char> host(kBytes);
    devices->Copy(CHORUS_HOST_DEVICE, host.data(), device, p, kBytes);
    return host;
  };

  std::vector<unsigned char> expected = a;
  cpu->Reduce(0, expected.data(), expected.data(), b.data(), kCount, CHORUS_F32, CHORUS_REDUCE_MAX);
  uint64_t before = ProgramsCompiled();
  devices->Reduce(1, z, x, y, kCount, CHORUS_F32, CHORUS_REDUCE_MAX);
  EXPECT_EQ(ProgramsCompiled(), before + 1);
  EXPECT_EQ(read(1, z), expected);
  devices->Reduce(1, x, x, y, kCount, CHORUS_F32, CHORUS_REDUCE_MAX);  // in place: the same program
  EXPECT_EQ(ProgramsCompiled(), before + 1);
  EXPECT_EQ(read(1, x), expected);

  cpu->Divide(0, expected.data(), kCount, CHORUS_F32, 7);
  before = ProgramsCompiled();
  devices->Divide(1, x, kCount, CHORUS_F32, 7);
  EXPECT_EQ(ProgramsCompiled(), before + 1);
  EXPECT_EQ(read(1, x), expected);

  // A whole allocation to another device: PJRT's device-to-device copy, no program.
  void* w = devices->Allocate(0, kBytes);
  before = ProgramsCompiled();
  devices->Copy(0, w, 1, x, kBytes);
  EXPECT_EQ(read(0, w), expected);
  EXPECT_EQ(ProgramsCompiled(), before);

  // The second half of each allocation: on the host.
  constexpr size_t kHalf = kCount / 2;
  const std::vector<unsigned char> z_before = read(1, z);
  std::vector<unsigned char> half_expected(z_before.begin() + kHalf * 4, z_before.end());
  std::vector<unsigned char> y_half(b.begin() + kHalf * 4, b.end());
  cpu->Reduce(0, half_expected.data(), half_expected.data(), y_half.data(), kCount - kHalf,
              CHORUS_F32, CHORUS_REDUCE_SUM);
  before = ProgramsCompiled();
  devices->Reduce(1, static_cast<char*>(z) + kHalf * 4, static_cast<char*>(z) + kHalf * 4,
                  static_cast<char*>(y) + kHalf * 4, kCount - kHalf, CHORUS_F32, CHORUS_REDUCE_SUM);
  EXPECT_EQ(ProgramsCompiled(), before);
  const auto z_now = read(1, z);
  EXPECT_EQ(std::vector<unsigned char>(z_now.begin() + kHalf * 4, z_now.end()), half_expected);
  for (auto [device, p] : {std::pair<uint32_t, void*>{1, x}, {1, y}, {1, z}, {0, w}}) {
    devices->Deallocate(device, p);
  }
}

TEST(TpuCrossDeviceOps, OtherDevicesAreRefusedNamingWhatTheyNeed) {
  auto cpu = DeviceEnumerator::Create(TpuRegistry().FindPlugin("core"), {{"count", "2"}});
  try {
    CrossDeviceOps::Create(TpuRegistry(), "tpu", All(cpu));
    FAIL() << "tpu cross-device ops were created on cpu devices";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("'pjrt' enumerator's devices"));
  }
}

}  // namespace
}  // namespace chorus::tpu
