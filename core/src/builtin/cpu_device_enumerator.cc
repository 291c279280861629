// The cpu platform: N virtual devices over host memory (CHORUS_CPU_DEVICES, or the "count"
// option), each one replica. Memory is plain aligned host memory; the kernels are the host's.
#include <unistd.h>

#include <chorus/plugin_sdk.hpp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/host_kernels.h"
#include "builtin/builtin_plugin.h"

struct chorus_device_context {
  std::vector<std::string> names;
  uint64_t memory_bytes = 0;
};

namespace chorus::internal {
namespace {

using sdk::Fail;
using sdk::Guard;
using sdk::RequireArgs;

constexpr uint64_t kMaxCpuDevices = 1024;

void RequireDevice(const chorus_device_context* ctx, uint32_t device, const char* what,
                   bool host_allowed) {
  if (ctx == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": device context is NULL");
  if (device == CHORUS_HOST_DEVICE && host_allowed) return;
  if (device >= ctx->names.size()) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": device ", device, " does not exist (there are ",
         ctx->names.size(), " cpu devices)");
  }
}

chorus_status Create(const chorus_device_context_create_args* args, chorus_device_context** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cpu create: out is NULL");
    *out = nullptr;
    const auto& a = RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_device_context_create_args, num_options), "cpu create");
    const uint64_t count = sdk::IntegerOption(a.options, a.num_options, "count", 1);
    if (count > kMaxCpuDevices) {
      Fail(CHORUS_INVALID_ARGUMENT, "cpu create: count ", count, " is more than ", kMaxCpuDevices);
    }
    auto ctx = std::make_unique<chorus_device_context>();
    for (uint64_t i = 0; i < count; ++i) ctx->names.push_back("CPU:" + std::to_string(i));
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_size > 0) {
      ctx->memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
    }
    *out = ctx.release();
  });
}

void Destroy(chorus_device_context* ctx) { delete ctx; }

chorus_status DeviceCount(chorus_device_context* ctx, uint32_t* count) {
  return Guard([&] {
    if (ctx == nullptr || count == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "cpu device_count: NULL argument");
    *count = static_cast<uint32_t>(ctx->names.size());
  });
}

chorus_status DeviceInfo(chorus_device_context* ctx, uint32_t index, chorus_device_info* info) {
  return Guard([&] {
    RequireDevice(ctx, index, "cpu device_info", false);
    if (info == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cpu device_info: info is NULL");
    if (!CHORUS_HAS_FIELD(info, chorus_device_info, name)) {
      Fail(CHORUS_INVALID_ARGUMENT, "cpu device_info: struct_size ", info->struct_size,
           " is too small");
    }
    info->kind = CHORUS_DEVICE_CPU;
    info->index = index;
    info->name = ctx->names[index].c_str();
    if (CHORUS_HAS_FIELD(info, chorus_device_info, memory_bytes)) {
      info->memory_bytes = ctx->memory_bytes;
    }
    if (CHORUS_HAS_FIELD(info, chorus_device_info, numa_node)) info->numa_node = -1;
    if (CHORUS_HAS_FIELD(info, chorus_device_info, pci_bus_id)) info->pci_bus_id = "";
    if (CHORUS_HAS_FIELD(info, chorus_device_info, coords)) {
      for (int32_t& c : info->coords) c = -1;
    }
  });
}

chorus_status Allocate(chorus_device_context* ctx, uint32_t device, size_t bytes, void** out) {
  return Guard([&] {
    RequireDevice(ctx, device, "cpu allocate", true);
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cpu allocate: out is NULL");
    constexpr size_t kAlignment = 64;
    const size_t rounded =
        bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
    *out = std::aligned_alloc(kAlignment, rounded);
    if (*out == nullptr) Fail(CHORUS_OUT_OF_MEMORY, "cpu allocate: ", bytes, " bytes");
  });
}

chorus_status Deallocate(chorus_device_context* ctx, uint32_t device, void* pointer) {
  return Guard([&] {
    RequireDevice(ctx, device, "cpu deallocate", true);
    std::free(pointer);
  });
}

chorus_status Copy(chorus_device_context* ctx, const chorus_copy_args* args) {
  return Guard([&] {
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_copy_args, bytes), "cpu copy");
    RequireDevice(ctx, a.dst_device, "cpu copy (destination)", true);
    RequireDevice(ctx, a.src_device, "cpu copy (source)", true);
    if (a.bytes == 0) return;
    if (a.dst == nullptr || a.src == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "cpu copy: NULL buffer with ", a.bytes, " bytes");
    }
    if (a.dst != a.src) std::memmove(a.dst, a.src, a.bytes);
  });
}

chorus_status Reduce(chorus_device_context* ctx, const chorus_reduce_kernel_args* args) {
  return Guard([&] {
    const auto& a =
        RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_kernel_args, op), "cpu reduce");
    RequireDevice(ctx, a.device, "cpu reduce", true);
    ReduceHost(a.dst, a.a, a.b, a.count, a.dtype, a.op);
  });
}

chorus_status Divide(chorus_device_context* ctx, const chorus_divide_args* args) {
  return Guard([&] {
    const auto& a =
        RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_divide_args, divisor), "cpu divide");
    RequireDevice(ctx, a.device, "cpu divide", true);
    DivideHost(a.data, a.count, a.dtype, a.divisor);
  });
}

chorus_status Synchronize(chorus_device_context* ctx, uint32_t device, chorus_stream*) {
  return Guard([&] { RequireDevice(ctx, device, "cpu synchronize", true); });
}

}  // namespace

const chorus_device_enumerator_api* CpuDeviceEnumeratorTable() {
  static const chorus_device_enumerator_api table = [] {
    chorus_device_enumerator_api t{};
    t.struct_size = sizeof(t);
    t.platform = "cpu";
    t.create = Create;
    t.destroy = Destroy;
    t.device_count = DeviceCount;
    t.device_info = DeviceInfo;
    t.allocate = Allocate;
    t.deallocate = Deallocate;
    t.copy = Copy;
    t.reduce = Reduce;
    t.divide = Divide;
    t.synchronize = Synchronize;
    return t;
  }();
  return &table;
}

}  // namespace chorus::internal
