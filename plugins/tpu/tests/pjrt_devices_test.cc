// The "pjrt" device enumerator of libchorus-tpu.so over chorus's reference PJRT plugin, through
// the core as a strategy reaches it: devices and their names, memory whose buffers are PJRT
// handles behind offsettable addresses (whole and partial copies every way, reads of unwritten
// memory, addresses that are not its memory), the reduce and divide kernels against the host's,
// and the core's cross-device ops (reduction_to_one_device) over the PJRT devices.
#include <chorus/chorus.h>
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <numeric>
#include <vector>

#include "reference_devices.h"
#include "scoped_variable.h"

namespace chorus::tpu {
namespace {

using testing::HasSubstr;

using test::ReferenceDevices;
using test::TpuRegistry;

std::vector<unsigned char> Pattern(size_t bytes, unsigned seed) {
  std::vector<unsigned char> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>((i * 31 + seed) % 251);
  return out;
}

TEST(PjrtDevices, TheReferencePluginsDevicesAreListedWithThePlatformAndKind) {
  auto devices = ReferenceDevices(3);
  EXPECT_EQ(devices->platform(), "pjrt");
  ASSERT_EQ(devices->count(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    const DeviceInfo& info = devices->info(i);
    EXPECT_EQ(info.kind, CHORUS_DEVICE_OTHER) << "the reference plugin is no accelerator";
    EXPECT_THAT(info.name, HasSubstr("PJRT:" + std::to_string(i) + " (reference"));
  }
}

TEST(PjrtDevices, WithoutAPjrtPluginThereAreNoDevices) {
  chorus::test::ScopedVariable plugin("CHORUS_PJRT_PLUGIN", nullptr);
  chorus::test::ScopedVariable tpu_path("TPU_LIBRARY_PATH", nullptr);
  // As the enumerator looks for it: where the loader finds it, loaded or not.
  if (void* libtpu = dlopen("libtpu.so", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(libtpu);
    GTEST_SKIP() << "libtpu.so is on this machine's loader path";
  }
  auto devices = DeviceEnumerator::Create(TpuRegistry().FindPlugin("tpu"));
  EXPECT_EQ(devices->count(), 0u);
}

TEST(PjrtDevices, ANamedPluginThatIsMissingFailsCreateNamingIt) {
  chorus::test::ScopedVariable plugin("CHORUS_PJRT_PLUGIN", "/nonexistent/libpjrt.so");
  try {
    DeviceEnumerator::Create(TpuRegistry().FindPlugin("tpu"));
    FAIL() << "create succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/libpjrt.so"));
  }
}

// Whole and partial writes and reads, at offsets into an allocation, between the host and two
// devices; a partial write keeps the rest of the allocation.
TEST(PjrtDevices, CopiesAtOffsetsMoveExactlyTheirBytes) {
  auto devices = ReferenceDevices(2);
  for (size_t bytes : {size_t{1}, size_t{7}, size_t{4096}, size_t{100003}}) {
    SCOPED_TRACE(bytes);
    const std::vector<unsigned char> first = Pattern(bytes, 1), second = Pattern(bytes, 2);
    char* a = static_cast<char*>(devices->Allocate(0, bytes));
    char* b = static_cast<char*>(devices->Allocate(1, bytes));
    devices->Copy(0, a, CHORUS_HOST_DEVICE, first.data(), bytes);
    // Unwritten memory reads as zeros.
    std::vector<unsigned char> got(bytes, 0xff);
    devices->Copy(CHORUS_HOST_DEVICE, got.data(), 1, b, bytes);
    EXPECT_EQ(got, std::vector<unsigned char>(bytes, 0));
    // Device to device, whole.
    devices->Copy(1, b, 0, a, bytes);
    devices->Copy(CHORUS_HOST_DEVICE, got.data(), 1, b, bytes);
    EXPECT_EQ(got, first);
    // The second half of `second` into the second half of b, from the host.
    const size_t half = bytes / 2;
    devices->Copy(1, b + half, CHORUS_HOST_DEVICE, second.data() + half, bytes - half);
    std::vector<unsigned char> expected = first;
    std::memcpy(expected.data() + half, second.data() + half, bytes - half);
    devices->Copy(CHORUS_HOST_DEVICE, got.data(), 1, b, bytes);
    EXPECT_EQ(got, expected);
    // A part of a read back, from inside the allocation.
    if (bytes > 2) {
      std::vector<unsigned char> part(bytes - 2);
      devices->Copy(CHORUS_HOST_DEVICE, part.data(), 1, b + 1, bytes - 2);
      EXPECT_TRUE(std::equal(part.begin(), part.end(), expected.begin() + 1));
    }
    devices->Deallocate(0, a);
    devices->Deallocate(1, b);
  }
}

TEST(PjrtDevices, AnAddressThatIsNotItsMemoryIsAnErrorNamingIt) {
  auto devices = ReferenceDevices(2);
  char* a = static_cast<char*>(devices->Allocate(0, 64));
  std::vector<char> host(128);
  try {
    devices->Copy(CHORUS_HOST_DEVICE, host.data(), 0, a + 32, 64);
    FAIL() << "a read past the allocation succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not inside one allocation of device 0"));
  }
  EXPECT_THROW(devices->Copy(CHORUS_HOST_DEVICE, host.data(), 1, a, 64), Error)
      << "an allocation of device 0 read as device 1's";
  EXPECT_THROW(devices->Copy(0, host.data(), CHORUS_HOST_DEVICE, host.data(), 8), Error)
      << "host memory used as device memory";
  devices->Deallocate(0, a);
  EXPECT_THROW(devices->Deallocate(0, a), Error) << "a second deallocate";
}

// reduce and divide on the devices equal the core's host kernels, for every dtype and op, in
// place and into a third buffer.
TEST(PjrtDevices, KernelsMatchTheHostForEveryDtypeAndOp) {
  auto devices = ReferenceDevices(1);
  auto cpu = DeviceEnumerator::Create(TpuRegistry().FindPlugin("core"), {{"count", "1"}});
  constexpr size_t kCount = 1001;
  for (int d = 0; d < CHORUS_DTYPE_COUNT; ++d) {
    const auto dtype = static_cast<chorus_dtype>(d);
    const size_t bytes = kCount * chorus_dtype_size(dtype);
    std::vector<unsigned char> a(bytes), b(bytes);
    for (size_t i = 0; i < kCount; ++i) {
      sdk::StoreElement(a.data(), i, dtype, static_cast<double>((i * 37 + 11) % 23) + 1);
      sdk::StoreElement(b.data(), i, dtype, static_cast<double>((i * 53 + 7) % 19) + 1);
    }
    void* da = devices->Allocate(0, bytes);
    void* db = devices->Allocate(0, bytes);
    void* dout = devices->Allocate(0, bytes);
    for (int o = CHORUS_REDUCE_SUM; o <= CHORUS_REDUCE_MAX; ++o) {
      const auto op = static_cast<chorus_reduce_op>(o);
      SCOPED_TRACE(std::string(DtypeName(dtype)) + " " + ReduceOpName(op));
      std::vector<unsigned char> expected = a;
      cpu->Reduce(0, expected.data(), expected.data(), b.data(), kCount, dtype, op);
      devices->Copy(0, da, CHORUS_HOST_DEVICE, a.data(), bytes);
      devices->Copy(0, db, CHORUS_HOST_DEVICE, b.data(), bytes);
      devices->Reduce(0, dout, da, db, kCount, dtype, op);
      devices->Reduce(0, da, da, db, kCount, dtype, op);  // in place
      std::vector<unsigned char> got(bytes), in_place(bytes);
      devices->Copy(CHORUS_HOST_DEVICE, got.data(), 0, dout, bytes);
      devices->Copy(CHORUS_HOST_DEVICE, in_place.data(), 0, da, bytes);
      EXPECT_EQ(got, expected);
      EXPECT_EQ(in_place, expected);
    }
    std::vector<unsigned char> expected = a;
    cpu->Divide(0, expected.data(), kCount, dtype, 3);
    devices->Copy(0, da, CHORUS_HOST_DEVICE, a.data(), bytes);
    devices->Divide(0, da, kCount, dtype, 3);
    std::vector<unsigned char> got(bytes);
    devices->Copy(CHORUS_HOST_DEVICE, got.data(), 0, da, bytes);
    EXPECT_EQ(got, expected) << "divide " << DtypeName(dtype);
    for (void* p : {da, db, dout}) devices->Deallocate(0, p);
  }
}

// What MirroredStrategy does with the PJRT devices: the core's cross-device ops reduce every
// replica's buffer into every replica's, for 1, 2 and 3 devices and odd sizes.
TEST(PjrtDevices, TheCoresCrossDeviceOpsAllReduceOverThePjrtDevices) {
  for (int n : {1, 2, 3}) {
    auto devices = ReferenceDevices(n);
    std::vector<Device> replicas;
    for (uint32_t i = 0; i < devices->count(); ++i) replicas.push_back({devices, i});
    auto ops = CrossDeviceOps::Create(TpuRegistry(), "reduction_to_one_device", replicas);
    for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
      SCOPED_TRACE(std::to_string(n) + " devices, " + std::to_string(count) + " elements");
      ReduceSpec spec;
      spec.dtype = CHORUS_F32;
      spec.count = count;
      std::vector<void*> buffers;
      for (uint32_t i = 0; i < devices->count(); ++i) {
        std::vector<float> host(count);
        std::iota(host.begin(), host.end(), static_cast<float>(i));
        void* p = devices->Allocate(i, count * sizeof(float));
        devices->Copy(i, p, CHORUS_HOST_DEVICE, host.data(), count * sizeof(float));
        buffers.push_back(p);
        spec.inputs.push_back({i, p});
        spec.outputs.push_back({i, p});
      }
      ops->Reduce(CHORUS_REDUCE_SUM, spec);
      for (uint32_t i = 0; i < devices->count(); ++i) {
        std::vector<float> host(count);
        devices->Copy(CHORUS_HOST_DEVICE, host.data(), i, buffers[i], count * sizeof(float));
        for (size_t k : {size_t{0}, count / 2, count - 1}) {
          // sum over replicas r of (k + r)
          const float expected = static_cast<float>(n * k + n * (n - 1) / 2);
          EXPECT_EQ(host[k], expected) << "replica " << i << " element " << k;
        }
        devices->Deallocate(i, buffers[i]);
      }
    }
  }
}

// The core's reduction_to_one_device sums through an enumerator's kernels in the pairwise tree
// of its fused host path, ((in0 + in1) + (in2 + in3)) + ..., so the PJRT devices and the cpu
// devices give the same bits for any number of replicas.
TEST(PjrtDevices, TheCoresCrossDeviceOpsSumInTheOrderOfTheHostPath) {
  constexpr size_t kCount = 4099;
  for (int n = 1; n <= 7; ++n) {
    SCOPED_TRACE(std::to_string(n) + " replicas");
    std::vector<std::vector<float>> inputs(static_cast<size_t>(n), std::vector<float>(kCount));
    for (size_t r = 0; r < inputs.size(); ++r) {
      for (size_t k = 0; k < kCount; ++k) {
        // Magnitudes far apart, so that a different association changes the sum's last bits.
        inputs[r][k] = static_cast<float>((k * 7919 + r * 104729) % 1000003) *
                       (r % 2 == 0 ? 1e-7f : 3.3f) * (k % 3 == 0 ? -1.0f : 1.0f);
      }
    }
    auto pjrt = ReferenceDevices(n);
    auto cpu =
        DeviceEnumerator::Create(TpuRegistry().FindPlugin("core"), {{"count", std::to_string(n)}});
    std::vector<std::vector<float>> results;
    for (const auto& devices : {pjrt, cpu}) {
      std::vector<Device> replicas;
      for (uint32_t i = 0; i < devices->count(); ++i) replicas.push_back({devices, i});
      auto ops = CrossDeviceOps::Create(TpuRegistry(), "reduction_to_one_device", replicas);
      ReduceSpec spec;
      spec.dtype = CHORUS_F32;
      spec.count = kCount;
      std::vector<void*> buffers;
      for (uint32_t i = 0; i < devices->count(); ++i) {
        void* p = devices->Allocate(i, kCount * sizeof(float));
        devices->Copy(i, p, CHORUS_HOST_DEVICE, inputs[i].data(), kCount * sizeof(float));
        buffers.push_back(p);
        spec.inputs.push_back({i, p});
        spec.outputs.push_back({i, p});
      }
      ops->Reduce(CHORUS_REDUCE_SUM, spec);
      std::vector<float> out(kCount);
      devices->Copy(CHORUS_HOST_DEVICE, out.data(), 0, buffers[0], kCount * sizeof(float));
      results.push_back(out);
      for (uint32_t i = 0; i < devices->count(); ++i) devices->Deallocate(i, buffers[i]);
    }
    EXPECT_TRUE(std::memcmp(results[0].data(), results[1].data(), kCount * sizeof(float)) == 0)
        << "the PJRT devices' sum differs from the cpu devices' in some bit";
  }
}

}  // namespace
}  // namespace chorus::tpu
