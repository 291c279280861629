#include <chorus/base/error.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ring_test_util.h"

namespace chorus {
namespace {

using ring_test::CorePlugin;

TEST(CpuDevices, CountAndNames) {
  auto cpu = DeviceEnumerator::Create(CorePlugin(), {{"count", "3"}});
  EXPECT_EQ(cpu->platform(), "cpu");
  ASSERT_EQ(cpu->count(), 3u);
  EXPECT_EQ(cpu->info(2).name, "CPU:2");
  EXPECT_EQ(cpu->info(2).kind, CHORUS_DEVICE_CPU);
  EXPECT_GT(cpu->info(0).memory_bytes, 0u);
  EXPECT_THROW(cpu->info(3), Error);
}

TEST(CpuDevices, ZeroDevicesIsValid) {
  auto cpu = DeviceEnumerator::Create(CorePlugin(), {{"count", "0"}});
  EXPECT_EQ(cpu->count(), 0u);
  chorus_device_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(cpu->api().device_info(cpu->context(), 0, &info), CHORUS_INVALID_ARGUMENT);
}

TEST(CpuDevices, ABadCountOptionIsAnErrorNamingIt) {
  try {
    DeviceEnumerator::Create(CorePlugin(), {{"count", "many"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("option count=many is not a non-negative integer"),
              std::string::npos)
        << e.what();
  }
}

TEST(CpuDevices, BufferRoundTripAndDivide) {
  auto cpu = DeviceEnumerator::Create(CorePlugin(), {{"count", "2"}});
  DeviceBuffer buffer(Device{cpu, 1}, 4 * sizeof(int32_t));
  const std::vector<int32_t> values{7, -7, 9, 100};
  buffer.CopyFromHost(values.data(), 16);
  cpu->Divide(1, buffer.data(), 4, CHORUS_I32, 2);
  std::vector<int32_t> back(4);
  buffer.CopyToHost(back.data(), 16);
  EXPECT_EQ(back, (std::vector<int32_t>{3, -3, 4, 50}));  // toward zero, exact
  EXPECT_THROW(buffer.CopyFromHost(values.data(), 17), Error);
}

TEST(CpuDevices, DivideIsExactForIntegerMeans) {
  auto cpu = DeviceEnumerator::Create(CorePlugin(), {{"count", "1"}});
  std::vector<int64_t> sums{6, 9, -6};
  cpu->Divide(0, sums.data(), 3, CHORUS_I64, 3);
  EXPECT_EQ(sums, (std::vector<int64_t>{2, 3, -2}));
  EXPECT_THROW(cpu->Divide(0, sums.data(), 3, CHORUS_I64, 0), Error);
}

TEST(CpuDevices, ReduceThroughTheWrapperAndItsErrors) {
  auto cpu = DeviceEnumerator::Create(CorePlugin(), {{"count", "1"}});
  std::vector<int32_t> a{1, -2, 3}, b{10, 20, -30};
  cpu->Reduce(0, a.data(), a.data(), b.data(), 3, CHORUS_I32, CHORUS_REDUCE_SUM);
  EXPECT_EQ(a, (std::vector<int32_t>{11, 18, -27}));
  try {
    cpu->Reduce(0, a.data(), a.data(), b.data(), 3, CHORUS_I32, CHORUS_REDUCE_MEAN);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce failed with"), std::string::npos) << e.what();
  }
}

// Divisors above INT64_MAX have no signed 64-bit form; the quotients are still exact.
TEST(CpuDevices, DivideIsExactForDivisorsBeyondInt64) {
  auto cpu = DeviceEnumerator::Create(CorePlugin(), {{"count", "1"}});
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> values{kMin, kMax, -1};
  cpu->Divide(0, values.data(), 3, CHORUS_I64, uint64_t{1} << 63);
  EXPECT_EQ(values, (std::vector<int64_t>{-1, 0, 0}));
  values = {kMin, kMax, -1};
  cpu->Divide(0, values.data(), 3, CHORUS_I64, (uint64_t{1} << 63) + 1);
  EXPECT_EQ(values, (std::vector<int64_t>{0, 0, 0}));
  std::vector<uint8_t> bytes{255, 7};
  cpu->Divide(0, bytes.data(), 2, CHORUS_U8, ~uint64_t{0});
  EXPECT_EQ(bytes, (std::vector<uint8_t>{0, 0}));
}

TEST(CpuDevices, OutOfRangeDeviceIsRejectedWithItsIndex) {
  auto cpu = DeviceEnumerator::Create(CorePlugin(), {{"count", "2"}});
  try {
    cpu->Allocate(5, 16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device 5 does not exist (there are 2 cpu devices)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace chorus
