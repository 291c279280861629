#include "pjrt_devices.h"

#include <chorus/plugin_sdk.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "handle_memory.h"
#include "pjrt_client.h"
#include "pjrt_device_context.h"
#include "stablehlo_programs.h"

namespace chorus::tpu {

using Place = HandleMemory::Place;

namespace {

using sdk::Fail;
using sdk::Guard;

// Whether a resolved address is a whole allocation of `bytes`: what programs take.
bool IsWhole(const Place& place, size_t bytes) {
  return place.offset == 0 && place.allocation.bytes == bytes;
}

void RequireDevice(const chorus_device_context* ctx, uint32_t device, const char* what) {
  if (ctx == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "pjrt ", what, ": context is NULL");
  if (device >= ctx->names.size()) {
    Fail(CHORUS_INVALID_ARGUMENT, "pjrt ", what, ": device ", device, " does not exist (",
         ctx->names.size(), " PJRT devices)");
  }
}

// What a PJRT platform's devices are to chorus; "reference" (chorus's own test double) and any
// platform chorus does not know are OTHER, so that they are never picked as accelerators by
// default.
chorus_device_kind KindOf(const std::string& platform) {
  if (platform == "tpu") return CHORUS_DEVICE_TPU;
  if (platform == "cuda" || platform == "rocm" || platform == "gpu") return CHORUS_DEVICE_GPU;
  if (platform == "cpu") return CHORUS_DEVICE_CPU;
  return CHORUS_DEVICE_OTHER;
}

chorus_status Create(const chorus_device_context_create_args* args, chorus_device_context** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "pjrt create: out is NULL");
    *out = nullptr;
    sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_device_context_create_args, num_options),
                     "pjrt create");
    auto ctx = std::make_unique<chorus_device_context>();
    ctx->timeout = std::chrono::milliseconds(
        1000 * sdk::IntegerOption(args->options, args->num_options, "timeout_seconds", 60));
    for (size_t i = 0; i < args->num_options; ++i) {
      const char* key = args->options[i].key != nullptr ? args->options[i].key : "";
      if (std::strcmp(key, "timeout_seconds") != 0) {
        Fail(CHORUS_INVALID_ARGUMENT, "pjrt create: unknown option '", key,
             "'; the pjrt enumerator takes timeout_seconds (CHORUS_PJRT_PLUGIN picks the PJRT "
             "plugin, CHORUS_PJRT_OPTIONS its client's options)");
      }
    }
    PjrtPluginChoice choice;
    try {
      choice = ChoosePjrtPlugin(ReferencePjrtPluginPath());
    } catch (const std::exception& e) {
      // No PJRT plugin on this machine: no devices, as an enumerator without hardware has.
      sdk::Log(CHORUS_LOG_DEBUG, std::string("pjrt: no devices: ") + e.what());
      ctx->description = std::string("no PJRT plugin: ") + e.what();
      *out = ctx.release();
      return;
    }
    // A job of several hosts (1.5): the client meets the other hosts' clients through the job's
    // store, as a multi-process PJRT client does through its key-value callbacks.
    const chorus_job* job =
        CHORUS_HAS_FIELD(args, chorus_device_context_create_args, job) ? args->job : nullptr;
    PjrtJob pjrt_job;
    if (job != nullptr && job->num_tasks > 1) {
      if (job->struct_size < CHORUS_STRUCT_SIZE(chorus_job, store) || job->store == nullptr) {
        Fail(CHORUS_INVALID_ARGUMENT, "pjrt create: the job has no store");
      }
      pjrt_job.store = job->store;
      pjrt_job.process_index = job->task_index;
      pjrt_job.num_processes = job->num_tasks;
      if (job->struct_size >= CHORUS_STRUCT_SIZE(chorus_job, timeout_ms) && job->timeout_ms > 0) {
        pjrt_job.timeout = std::chrono::milliseconds(job->timeout_ms);
      }
    }
    const char* options = std::getenv("CHORUS_PJRT_OPTIONS");
    ctx->client = std::make_unique<PjrtClient>(PjrtLibrary::Open(choice),
                                               ParsePjrtOptions(options ? options : ""),
                                               pjrt_job.store != nullptr ? &pjrt_job : nullptr);
    const std::string& platform = ctx->client->platform_name();
    for (const PjrtDevice& device : ctx->client->addressable_devices()) {
      const chorus_device_kind kind = KindOf(platform);
      std::string prefix = kind == CHORUS_DEVICE_TPU   ? "TPU"
                           : kind == CHORUS_DEVICE_GPU ? "GPU"
                                                       : "PJRT";
      ctx->names.push_back(prefix + ":" + std::to_string(ctx->names.size()) + " (" + platform +
                           " " + device.kind + ", PJRT id " + std::to_string(device.id) + ")");
      ctx->kinds.push_back(kind);
    }
    const PjrtLibrary& library = *ctx->client->library();
    ctx->description = "PJRT plugin " + choice.path + " (from " + choice.source + "), PJRT C API " +
                       std::to_string(library.major_version()) + "." +
                       std::to_string(library.minor_version()) + ", platform " + platform + " " +
                       ctx->client->platform_version() +
                       (choice.path == ReferencePjrtPluginPath()
                            ? "; chorus's reference PJRT plugin, a test double over host memory, "
                              "not XLA"
                            : "");
    if (ctx->client->multi_process()) {
      ctx->description += "; process " + std::to_string(ctx->client->process_index()) + " of " +
                          std::to_string(pjrt_job.num_processes) + " (job " +
                          (job->id != nullptr ? job->id : "without an id") + "), " +
                          std::to_string(ctx->client->global_device_count()) +
                          " devices in the job";
    }
    sdk::Log(CHORUS_LOG_INFO, "pjrt: " + std::to_string(ctx->names.size()) + " " + platform +
                                  " devices; " + ctx->description);
    *out = ctx.release();
  });
}

void Destroy(chorus_device_context* ctx) { delete ctx; }

const char* Describe(chorus_device_context* ctx) {
  return ctx == nullptr || ctx->description.empty() ? nullptr : ctx->description.c_str();
}

chorus_status DeviceCount(chorus_device_context* ctx, uint32_t* count) {
  return Guard([&] {
    if (ctx == nullptr || count == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "pjrt device_count: NULL argument");
    }
    *count = static_cast<uint32_t>(ctx->names.size());
  });
}

chorus_status DeviceInfo(chorus_device_context* ctx, uint32_t index, chorus_device_info* info) {
  return Guard([&] {
    RequireDevice(ctx, index, "device_info");
    if (info == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "pjrt device_info: info is NULL");
    if (info->struct_size < CHORUS_STRUCT_SIZE(chorus_device_info, index)) {
      Fail(CHORUS_INVALID_ARGUMENT, "pjrt device_info: struct_size is too small");
    }
    info->kind = ctx->kinds[index];
    info->index = index;
    if (CHORUS_HAS_FIELD(info, chorus_device_info, name)) info->name = ctx->names[index].c_str();
    if (CHORUS_HAS_FIELD(info, chorus_device_info, memory_bytes)) info->memory_bytes = 0;
    if (CHORUS_HAS_FIELD(info, chorus_device_info, numa_node)) info->numa_node = -1;
    if (CHORUS_HAS_FIELD(info, chorus_device_info, pci_bus_id)) info->pci_bus_id = "";
    if (CHORUS_HAS_FIELD(info, chorus_device_info, coords)) {
      const std::vector<int64_t>& coords = ctx->client->addressable_devices()[index].coords;
      for (size_t i = 0; i < 4; ++i) {
        info->coords[i] = i < coords.size() ? static_cast<int32_t>(coords[i]) : -1;
      }
    }
  });
}

chorus_status Allocate(chorus_device_context* ctx, uint32_t device, size_t bytes, void** out) {
  return Guard([&] {
    RequireDevice(ctx, device, "allocate");
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "pjrt allocate: out is NULL");
    *out = ctx->memory.Allocate(device, bytes);
  });
}

chorus_status Deallocate(chorus_device_context* ctx, uint32_t device, void* pointer) {
  return Guard([&] {
    RequireDevice(ctx, device, "deallocate");
    if (pointer != nullptr) ctx->memory.Deallocate(device, pointer);
  });
}

chorus_status Copy(chorus_device_context* ctx, const chorus_copy_args* args) {
  return Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_copy_args, stream), "pjrt copy");
    const bool dst_host = a.dst_device == CHORUS_HOST_DEVICE;
    const bool src_host = a.src_device == CHORUS_HOST_DEVICE;
    if (!dst_host) RequireDevice(ctx, a.dst_device, "copy");
    if (!src_host) RequireDevice(ctx, a.src_device, "copy");
    if (a.bytes == 0) return;
    if (a.dst == nullptr || a.src == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "pjrt copy: NULL buffer");
    }
    if (dst_host && src_host) {
      std::memmove(a.dst, a.src, a.bytes);
      return;
    }
    // Resolve both ends before moving anything, so that a bad address fails the whole copy.
    std::optional<Place> dst, src;
    if (!dst_host) dst = ctx->memory.Find(a.dst_device, a.dst, a.bytes, "copy destination");
    if (!src_host) src = ctx->memory.Find(a.src_device, a.src, a.bytes, "copy source");
    if (!dst_host && !src_host && a.dst_device != a.src_device && IsWhole(*dst, a.bytes) &&
        IsWhole(*src, a.bytes)) {
      // Device to device, without the host.
      std::shared_ptr<PjrtBuffer> source = CurrentBuffer(*ctx, src->allocation);
      auto copy = std::make_shared<PjrtBuffer>(ctx->client->CopyToDevice(
          *source, ctx->client->addressable_devices()[a.dst_device], ctx->timeout));
      std::lock_guard<std::mutex> lock(dst->allocation.contents->mutex);
      dst->allocation.contents->buffer = std::move(copy);
      return;
    }
    if (dst_host) {
      const std::vector<char> bytes = ReadBytes(*ctx, *src, a.bytes);
      std::memcpy(a.dst, bytes.data(), a.bytes);
    } else if (src_host) {
      WriteBytes(*ctx, *dst, a.src, a.bytes);
    } else {
      const std::vector<char> bytes = ReadBytes(*ctx, *src, a.bytes);
      WriteBytes(*ctx, *dst, bytes.data(), a.bytes);
    }
  });
}

size_t Bytes(size_t count, chorus_dtype dtype) { return count * chorus_dtype_size(dtype); }

// Runs a one-device program (cached by its text) on `device` with the allocations' current
// buffers as its arguments, and makes its result `dst`'s contents.
void RunKernel(chorus_device_context& ctx, uint32_t device, const std::string& mlir,
               const std::vector<HandleMemory::Allocation>& arguments,
               const HandleMemory::Allocation& dst) {
  std::shared_ptr<const PjrtExecutable> executable = ctx.programs.Get(*ctx.client, mlir, 1, true);
  std::vector<std::shared_ptr<PjrtBuffer>> held;
  std::vector<pjrt::PJRT_Buffer*> handles;
  for (const HandleMemory::Allocation& argument : arguments) {
    held.push_back(CurrentBuffer(ctx, argument));
    handles.push_back(held.back()->handle());
  }
  std::vector<std::vector<PjrtBuffer>> results = ctx.client->Execute(
      *executable, {handles}, ctx.timeout, &ctx.client->addressable_devices()[device]);
  std::lock_guard<std::mutex> lock(dst.contents->mutex);
  dst.contents->buffer = std::make_shared<PjrtBuffer>(std::move(results.at(0).at(0)));
}

// The largest integer divisor a dtype's constant holds exactly (and, for integers, holds at all).
uint64_t LargestExactDivisor(chorus_dtype dtype) {
  switch (dtype) {
    case CHORUS_F32:
      return uint64_t{1} << 24;
    case CHORUS_F64:
    case CHORUS_I64:
      return uint64_t{1} << 53;
    case CHORUS_F16:
      return 2048;
    case CHORUS_BF16:
      return 256;
    case CHORUS_I32:
      return INT32_MAX;
    case CHORUS_U8:
      return UINT8_MAX;
    case CHORUS_I8:
      return INT8_MAX;
    default:
      return 0;
  }
}

// The kernels run as compiled programs on whole allocations (ReduceKernelProgram,
// DivideKernelProgram), and on the host between a read and a write of the device buffers for a
// part of an allocation.
chorus_status Reduce(chorus_device_context* ctx, const chorus_reduce_kernel_args* args) {
  return Guard([&] {
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_kernel_args, stream),
                                     "pjrt reduce");
    RequireDevice(ctx, a.device, "reduce");
    sdk::RequireDtype(a.dtype, "pjrt reduce");
    sdk::RequireReduceOp(a.op, "pjrt reduce");
    if (a.op == CHORUS_REDUCE_MEAN) Fail(CHORUS_INVALID_ARGUMENT, "pjrt reduce: op is MEAN");
    if (a.count == 0) return;
    if (a.dst == nullptr || a.a == nullptr || a.b == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "pjrt reduce: NULL buffer with count ", a.count);
    }
    const size_t bytes = Bytes(a.count, a.dtype);
    const Place dst = ctx->memory.Find(a.device, a.dst, bytes, "reduce destination");
    const Place x = ctx->memory.Find(a.device, a.a, bytes, "reduce input a");
    const Place y = ctx->memory.Find(a.device, a.b, bytes, "reduce input b");
    if (IsWhole(dst, bytes) && IsWhole(x, bytes) && IsWhole(y, bytes)) {
      RunKernel(*ctx, a.device, ReduceKernelProgram(a.dtype, a.op, a.count),
                {x.allocation, y.allocation}, dst.allocation);
      return;
    }
    std::vector<char> left = ReadBytes(*ctx, x, bytes);
    const std::vector<char> right = ReadBytes(*ctx, y, bytes);
    sdk::ReduceOnHost(left.data(), left.data(), right.data(), a.count, a.dtype, a.op);
    WriteBytes(*ctx, dst, left.data(), bytes);
  });
}

template <typename T>
void DivideIntegers(void* data, size_t count, uint64_t divisor) {
  auto* values = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) {
    values[i] = static_cast<T>(values[i] / static_cast<int64_t>(divisor));
  }
}

chorus_status Divide(chorus_device_context* ctx, const chorus_divide_args* args) {
  return Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_divide_args, stream), "pjrt divide");
    RequireDevice(ctx, a.device, "divide");
    sdk::RequireDtype(a.dtype, "pjrt divide");
    if (a.divisor == 0) Fail(CHORUS_INVALID_ARGUMENT, "pjrt divide: divisor is 0");
    if (a.count == 0) return;
    if (a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "pjrt divide: data is NULL");
    const size_t bytes = Bytes(a.count, a.dtype);
    const Place place = ctx->memory.Find(a.device, a.data, bytes, "divide");
    if (IsWhole(place, bytes) && a.divisor <= LargestExactDivisor(a.dtype)) {
      RunKernel(*ctx, a.device, DivideKernelProgram(a.dtype, a.count, a.divisor),
                {place.allocation}, place.allocation);
      return;
    }
    std::vector<char> values = ReadBytes(*ctx, place, bytes);
    switch (a.dtype) {
      case CHORUS_I32:
        DivideIntegers<int32_t>(values.data(), a.count, a.divisor);
        break;
      case CHORUS_I64:
        DivideIntegers<int64_t>(values.data(), a.count, a.divisor);
        break;
      case CHORUS_U8:
        DivideIntegers<uint8_t>(values.data(), a.count, a.divisor);
        break;
      case CHORUS_I8:
        DivideIntegers<int8_t>(values.data(), a.count, a.divisor);
        break;
      default:  // floats: in double, then rounded to the dtype once
        for (size_t i = 0; i < a.count; ++i) {
          sdk::StoreElement(
              values.data(), i, a.dtype,
              sdk::LoadElement(values.data(), i, a.dtype) / static_cast<double>(a.divisor));
        }
    }
    WriteBytes(*ctx, place, values.data(), bytes);
  });
}

// Every kernel completes before it returns, so every stream is already finished.
chorus_status Synchronize(chorus_device_context* ctx, uint32_t device, chorus_stream*) {
  return Guard([&] { RequireDevice(ctx, device, "synchronize"); });
}

}  // namespace

std::vector<char> ReadBytes(const chorus_device_context& ctx, const Place& place, size_t bytes) {
  std::shared_ptr<PjrtBuffer> buffer;
  {
    std::lock_guard<std::mutex> lock(place.allocation.contents->mutex);
    buffer = place.allocation.contents->buffer;
  }
  std::vector<char> whole(place.allocation.bytes, 0);
  if (buffer != nullptr && !whole.empty()) {
    ctx.client->ToHost(*buffer, whole.data(), whole.size(), ctx.timeout);
  }
  if (place.offset == 0 && bytes == whole.size()) return whole;
  return std::vector<char>(whole.begin() + static_cast<std::ptrdiff_t>(place.offset),
                           whole.begin() + static_cast<std::ptrdiff_t>(place.offset + bytes));
}

void WriteBytes(const chorus_device_context& ctx, const Place& place, const void* data,
                size_t bytes) {
  HandleMemory::Contents& contents = *place.allocation.contents;
  std::lock_guard<std::mutex> lock(contents.mutex);
  const size_t size = place.allocation.bytes;
  std::vector<char> whole;
  const void* source = data;
  if (bytes != size) {
    whole.assign(size, 0);
    if (contents.buffer != nullptr && size > 0) {
      ctx.client->ToHost(*contents.buffer, whole.data(), size, ctx.timeout);
    }
    std::memcpy(whole.data() + place.offset, data, bytes);
    source = whole.data();
  }
  const PjrtDevice& device = ctx.client->addressable_devices()[place.allocation.device];
  contents.buffer = std::make_shared<PjrtBuffer>(ctx.client->FromHost(
      device, pjrt::PJRT_Buffer_Type_U8, source, static_cast<int64_t>(size), ctx.timeout));
}

std::shared_ptr<PjrtBuffer> CurrentBuffer(const chorus_device_context& ctx,
                                          const HandleMemory::Allocation& allocation) {
  HandleMemory::Contents& contents = *allocation.contents;
  std::lock_guard<std::mutex> lock(contents.mutex);
  if (contents.buffer == nullptr) {
    const std::vector<char> zeros(allocation.bytes, 0);
    const PjrtDevice& device = ctx.client->addressable_devices()[allocation.device];
    contents.buffer = std::make_shared<PjrtBuffer>(
        ctx.client->FromHost(device, pjrt::PJRT_Buffer_Type_U8, zeros.data(),
                             static_cast<int64_t>(zeros.size()), ctx.timeout));
  }
  return contents.buffer;
}

std::vector<int64_t> DeviceAssignment(const chorus_device_context& ctx,
                                      const std::vector<uint32_t>& devices) {
  // A client of several processes: always say it (its default assignment may name another
  // process's devices).
  bool identity = !ctx.client->multi_process();
  for (size_t r = 0; r < devices.size(); ++r) identity = identity && devices[r] == r;
  if (identity) return {};
  std::vector<int64_t> ids;
  for (uint32_t device : devices) ids.push_back(ctx.client->addressable_devices().at(device).id);
  return ids;
}

const chorus_device_enumerator_api* PjrtDevicesTable() {
  static const chorus_device_enumerator_api table = [] {
    chorus_device_enumerator_api t{};
    t.struct_size = sizeof(t);
    t.platform = "pjrt";
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
    t.describe = Describe;
    return t;
  }();
  return &table;
}

}  // namespace chorus::tpu
