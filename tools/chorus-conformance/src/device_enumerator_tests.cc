// The plugin's device enumerator: device listing, memory, copies and the reduce and divide
// kernels on every device, against the host reference. A plugin may find no device here (no GPU
// on this machine): the per-device checks then skip and say so.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "reference.h"
#include "suite.h"

namespace chorus::conformance::internal {
namespace {

constexpr size_t kKernelCount = 1001;  // odd, so no kernel gets a multiple of its vector width

// Runs `body(devices, index)` for every device, or skips when there is none.
#define FOR_EACH_DEVICE(devices, index)                                                       \
  if ((devices)->count() == 0)                                                                \
    GTEST_SKIP() << "the plugin's '" << (devices)->platform()                                 \
                 << "' enumerator has no devices on this machine: per-device checks skipped " \
                 << "(run the kit where it lists a device to check them)";                    \
  for (uint32_t index = 0; index < (devices)->count(); ++index)

// Memory on one device of the plugin's enumerator, freed (and checked) on scope exit.
class Memory {
 public:
  Memory(const DeviceEnumerator& devices, uint32_t device, size_t bytes)
      : devices_(devices), device_(device) {
    status_ = devices_.api().allocate(devices_.context(), device, bytes, &data_);
  }
  ~Memory() {
    if (data_ != nullptr) {
      const chorus_status status = devices_.api().deallocate(devices_.context(), device_, data_);
      EXPECT_EQ(status, CHORUS_OK)
          << "deallocate on device " << device_ << ": " << StatusName(status)
          << "; deallocate must return CHORUS_OK for memory that allocate returned";
    }
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  chorus_status status() const { return status_; }
  void* data() const { return data_; }

 private:
  const DeviceEnumerator& devices_;
  uint32_t device_;
  void* data_ = nullptr;
  chorus_status status_;
};

chorus_status Copy(const DeviceEnumerator& devices, uint32_t dst_device, void* dst,
                   uint32_t src_device, const void* src, size_t bytes) {
  chorus_copy_args args{};
  args.struct_size = sizeof(args);
  args.dst_device = dst_device;
  args.dst = dst;
  args.src_device = src_device;
  args.src = src;
  args.bytes = bytes;
  return devices.api().copy(devices.context(), &args);
}

#define ASSERT_OK(suite, call, what)                                                 \
  do {                                                                               \
    const chorus_status status_ = (call);                                            \
    ASSERT_EQ(status_, CHORUS_OK) << what << ": " << StatusName(status_) << ": "     \
                                  << (suite).LastError()                             \
                                  << "; return CHORUS_OK for these valid arguments"; \
  } while (0)

void CheckInfo(const Suite& suite, const DeviceEnumerator& devices) {
  uint32_t count = 0;
  ASSERT_OK(suite, devices.api().device_count(devices.context(), &count), "device_count");
  std::cout << "note: device enumerator '" << devices.platform() << "' lists " << count
            << " device(s)" << (count == 0 ? " on this machine" : "") << "\n";
  for (uint32_t i = 0; i < count; ++i) {
    chorus_device_info info{};
    info.struct_size = sizeof(info);
    info.index = 0xdeadbeef;
    ASSERT_OK(suite, devices.api().device_info(devices.context(), i, &info),
              "device_info(" << i << ")");
    EXPECT_EQ(info.index, i) << "device_info(" << i << ").index; set it to the index asked for";
    EXPECT_LE(static_cast<uint32_t>(info.kind), static_cast<uint32_t>(CHORUS_DEVICE_OTHER))
        << "device_info(" << i << ").kind is " << static_cast<uint32_t>(info.kind)
        << ", no chorus_device_kind; set one of plugin.h's values (CHORUS_DEVICE_OTHER if none "
           "fits)";
    ASSERT_NE(info.name, nullptr) << "device_info(" << i << ").name is NULL; set a device name";
    EXPECT_STRNE(info.name, "") << "device_info(" << i << ").name is empty; set a readable name";
    EXPECT_NE(info.pci_bus_id, nullptr)
        << "device_info(" << i << ").pci_bus_id is NULL; use \"\" when there is none";
  }
}

// dst = a op b on `device` for every dtype and op, out of place and in place.
void CheckReduceKernel(const Suite& suite, const DeviceEnumerator& devices, uint32_t device) {
  for (chorus_dtype dtype : Dtypes()) {
    for (chorus_reduce_op op : PluginReduceOps()) {
      const Pattern pattern = PatternFor(op);
      std::vector<HostTensor> inputs(2, HostTensor(dtype, kKernelCount));
      inputs[0].Fill(pattern, 0);
      inputs[1].Fill(pattern, 1);
      const HostTensor& a = inputs[0];
      const HostTensor& b = inputs[1];
      const HostTensor expected = ExpectedReduce(op, inputs);
      HostTensor out(dtype, kKernelCount);
      Memory da(devices, device, a.bytes()), db(devices, device, b.bytes()),
          dst(devices, device, a.bytes());
      ASSERT_OK(suite, da.status(), "allocate " << a.bytes() << " bytes on device " << device);
      ASSERT_OK(suite, db.status(), "allocate " << a.bytes() << " bytes on device " << device);
      ASSERT_OK(suite, dst.status(), "allocate " << a.bytes() << " bytes on device " << device);
      ASSERT_OK(suite, Copy(devices, device, da.data(), CHORUS_HOST_DEVICE, a.data(), a.bytes()),
                "copy host to device");
      ASSERT_OK(suite, Copy(devices, device, db.data(), CHORUS_HOST_DEVICE, b.data(), b.bytes()),
                "copy host to device");
      for (bool in_place : {false, true}) {
        chorus_reduce_kernel_args args{};
        args.struct_size = sizeof(args);
        args.device = device;
        args.dst = in_place ? da.data() : dst.data();
        args.a = da.data();
        args.b = db.data();
        args.count = kKernelCount;
        args.dtype = dtype;
        args.op = op;
        const std::string what = std::string("reduce kernel ") + ReduceOpName(op) + " " +
                                 DtypeName(dtype) + " on device " + std::to_string(device) +
                                 (in_place ? " (dst == a)" : "");
        ASSERT_OK(suite, devices.api().reduce(devices.context(), &args), what);
        ASSERT_OK(suite, devices.api().synchronize(devices.context(), device, nullptr), what);
        ASSERT_OK(suite,
                  Copy(devices, CHORUS_HOST_DEVICE, out.data(), device, args.dst, out.bytes()),
                  "copy device to host");
        EXPECT_TRUE(SameValues(out, expected))
            << what << ": wrong values; dst[i] must be a[i] " << ReduceOpName(op)
            << " b[i] for i < count, with dst, a and b allowed to alias";
      }
    }
  }
}

// data /= 3 on `device` for every dtype; integers round toward zero.
void CheckDivideKernel(const Suite& suite, const DeviceEnumerator& devices, uint32_t device) {
  constexpr uint64_t kDivisor = 3;
  for (chorus_dtype dtype : Dtypes()) {
    HostTensor data(dtype, kKernelCount), out(dtype, kKernelCount), expected(dtype, kKernelCount);
    for (size_t i = 0; i < kKernelCount; ++i) {
      // Sums as MEAN divides them: -16..24 (0..24 for u8).
      const double value = dtype == CHORUS_U8 ? static_cast<double>(i * 7 % 25)
                                              : static_cast<double>(i * 7 % 41) - 16;
      data.Set(i, value);
      double quotient = value / kDivisor;
      if (IsInteger(dtype)) quotient = std::trunc(quotient);
      expected.Set(i, quotient);
    }
    Memory memory(devices, device, data.bytes());
    ASSERT_OK(suite, memory.status(), "allocate " << data.bytes() << " bytes on device " << device);
    ASSERT_OK(suite,
              Copy(devices, device, memory.data(), CHORUS_HOST_DEVICE, data.data(), data.bytes()),
              "copy host to device");
    chorus_divide_args args{};
    args.struct_size = sizeof(args);
    args.device = device;
    args.data = memory.data();
    args.count = kKernelCount;
    args.dtype = dtype;
    args.divisor = kDivisor;
    const std::string what = std::string("divide kernel ") + DtypeName(dtype) + " by 3 on device " +
                             std::to_string(device);
    ASSERT_OK(suite, devices.api().divide(devices.context(), &args), what);
    ASSERT_OK(suite, devices.api().synchronize(devices.context(), device, nullptr), what);
    ASSERT_OK(suite,
              Copy(devices, CHORUS_HOST_DEVICE, out.data(), device, memory.data(), out.bytes()),
              "copy device to host");
    // A float quotient may be rounded once more than the reference's: one unit of the dtype.
    EXPECT_TRUE(SameValues(out, expected, 2 * Epsilon(dtype)))
        << what
        << ": wrong values; data[i] must become data[i] / divisor, integers rounded toward "
           "zero";
  }
}

}  // namespace

void RegisterDeviceEnumeratorTests(const SuitePtr& suite) {
  // Every enumerator of the plugin (a 1.1 library may have several).
  for (size_t e = 0; e < suite->plugin().device_enumerators().size(); ++e) {
    AddTest("DeviceEnumerator", suite->EnumeratorTestName("DeviceInfo", e), [suite, e] {
      auto devices = suite->PluginDevices(e);
      if (devices) CheckInfo(*suite, *devices);
    });

    // device_info past the last device fails cleanly, with or without devices.
    AddTest("DeviceEnumerator", suite->EnumeratorTestName("DeviceInfoOutOfRange", e), [suite, e] {
      auto devices = suite->PluginDevices(e);
      if (!devices) return;
      for (uint32_t index : {devices->count(), devices->count() + 1000}) {
        chorus_device_info info{};
        info.struct_size = sizeof(info);
        ExpectStatus(*suite, devices->api().device_info(devices->context(), index, &info),
                     {CHORUS_INVALID_ARGUMENT, CHORUS_NOT_FOUND},
                     "device_info(" + std::to_string(index) + ") of " +
                         std::to_string(devices->count()) + " devices");
      }
    });

    // plugin.h: "The caller sets struct_size; the plugin fills what fits." A caller built with an
    // older plugin.h passes a smaller struct; nothing past its struct_size may be written.
    AddTest("DeviceEnumerator", suite->EnumeratorTestName("DeviceInfoRespectsStructSize", e),
            [suite, e] {
              auto devices = suite->PluginDevices(e);
              if (!devices) return;
              FOR_EACH_DEVICE(devices, device) {
                constexpr size_t kSize = CHORUS_STRUCT_SIZE(chorus_device_info, name);
                unsigned char bytes[sizeof(chorus_device_info)];
                std::memset(bytes, 0xa5, sizeof(bytes));
                chorus_device_info info;
                std::memcpy(&info, bytes, sizeof(info));
                info.struct_size = kSize;
                ASSERT_OK(*suite, devices->api().device_info(devices->context(), device, &info),
                          "device_info with struct_size " << kSize << " (up to 'name')");
                std::memcpy(bytes, &info, sizeof(info));
                for (size_t i = kSize; i < sizeof(bytes); ++i) {
                  ASSERT_EQ(bytes[i], 0xa5)
                      << "device_info wrote byte " << i << ", past struct_size " << kSize
                      << "; fill only the fields that end within info->struct_size";
                }
              }
            });

    AddTest("DeviceEnumerator", suite->EnumeratorTestName("CopyRoundTrip", e), [suite, e] {
      auto devices = suite->PluginDevices(e);
      if (!devices) return;
      FOR_EACH_DEVICE(devices, device) {
        constexpr size_t kBytes = 4099;
        std::vector<unsigned char> source(kBytes), back(kBytes, 0);
        std::iota(source.begin(), source.end(), static_cast<unsigned char>(device * 17));
        Memory first(*devices, device, kBytes), second(*devices, device, kBytes);
        ASSERT_OK(*suite, first.status(), "allocate " << kBytes << " bytes on device " << device);
        ASSERT_OK(*suite, second.status(), "allocate " << kBytes << " bytes on device " << device);
        ASSERT_OK(*suite,
                  Copy(*devices, device, first.data(), CHORUS_HOST_DEVICE, source.data(), kBytes),
                  "copy host to device " << device);
        ASSERT_OK(*suite, Copy(*devices, device, second.data(), device, first.data(), kBytes),
                  "copy within device " << device);
        ASSERT_OK(*suite,
                  Copy(*devices, CHORUS_HOST_DEVICE, back.data(), device, second.data(), kBytes),
                  "copy device " << device << " to host");
        EXPECT_EQ(source, back) << "host -> device " << device << " -> device " << device
                                << " -> host changed the bytes; copy must move exactly `bytes` "
                                   "bytes from src to dst";
      }
    });

    AddTest("DeviceEnumerator", suite->EnumeratorTestName("CopyBetweenDevices", e), [suite, e] {
      auto devices = suite->PluginDevices(e);
      if (!devices) return;
      if (devices->count() < 2) {
        GTEST_SKIP() << "the '" << devices->platform() << "' enumerator has " << devices->count()
                     << " device(s) here; copies between devices need two (run the kit where it "
                        "lists two to check them)";
      }
      constexpr size_t kBytes = 1 << 16;
      std::vector<unsigned char> source(kBytes), back(kBytes, 0);
      std::iota(source.begin(), source.end(), static_cast<unsigned char>(3));
      const uint32_t last = devices->count() - 1;
      Memory first(*devices, 0, kBytes), second(*devices, last, kBytes);
      ASSERT_OK(*suite, first.status(), "allocate on device 0");
      ASSERT_OK(*suite, second.status(), "allocate on device " << last);
      ASSERT_OK(*suite, Copy(*devices, 0, first.data(), CHORUS_HOST_DEVICE, source.data(), kBytes),
                "copy host to device 0");
      ASSERT_OK(*suite, Copy(*devices, last, second.data(), 0, first.data(), kBytes),
                "copy device 0 to device " << last);
      ASSERT_OK(*suite,
                Copy(*devices, CHORUS_HOST_DEVICE, back.data(), last, second.data(), kBytes),
                "copy device " << last << " to host");
      EXPECT_EQ(source, back) << "host -> device 0 -> device " << last
                              << " -> host changed bytes; copy between devices must move exactly "
                                 "`bytes` bytes from src to dst";
    });

    AddTest("DeviceEnumerator", suite->EnumeratorTestName("ReduceKernel", e), [suite, e] {
      auto devices = suite->PluginDevices(e);
      if (!devices) return;
      FOR_EACH_DEVICE(devices, device) {
        CheckReduceKernel(*suite, *devices, device);
        if (testing::Test::HasFatalFailure()) return;
      }
    });

    AddTest("DeviceEnumerator", suite->EnumeratorTestName("DivideKernel", e), [suite, e] {
      auto devices = suite->PluginDevices(e);
      if (!devices) return;
      FOR_EACH_DEVICE(devices, device) {
        CheckDivideKernel(*suite, *devices, device);
        if (testing::Test::HasFatalFailure()) return;
      }
    });

    AddTest("DeviceEnumerator", suite->EnumeratorTestName("Synchronize", e), [suite, e] {
      auto devices = suite->PluginDevices(e);
      if (!devices) return;
      FOR_EACH_DEVICE(devices, device) {
        ASSERT_OK(*suite, devices->api().synchronize(devices->context(), device, nullptr),
                  "synchronize(device " << device << ", NULL stream)");
      }
    });
  }
}

}  // namespace chorus::conformance::internal
