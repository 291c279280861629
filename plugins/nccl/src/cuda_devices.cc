#include "cuda_devices.h"

#include <cuda.h>  // CUcontext, for CurrentDeviceScope (the driver is reached at run time)
#include <cuda_runtime.h>

#include <chorus/plugin_sdk.hpp>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_kernels.h"

struct chorus_device_context {
  std::vector<std::string> names;
  std::vector<std::string> bus_ids;
  std::vector<uint64_t> memory;
  std::string description;  // what describe() answers
};

namespace chorus::nccl {
namespace {

using sdk::Fail;
using sdk::Guard;

std::once_flag g_count_once;
int g_count = 0;
std::string g_no_device_reason;

void CheckCuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    Fail(error == cudaErrorMemoryAllocation ? CHORUS_OUT_OF_MEMORY : CHORUS_INTERNAL, "cuda ", what,
         ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  }
}

void RequireDevice(const chorus_device_context* ctx, uint32_t device, const char* what) {
  if (ctx == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cuda ", what, ": context is NULL");
  if (device >= ctx->names.size()) {
    Fail(CHORUS_INVALID_ARGUMENT, "cuda ", what, ": device ", device, " does not exist (",
         ctx->names.size(), " CUDA devices)");
  }
}

cudaStream_t StreamOf(chorus_stream* stream) { return reinterpret_cast<cudaStream_t>(stream); }

// With the default stream the call completes before returning (plugin.h).
void Finish(chorus_stream* stream, const char* what) {
  if (stream == nullptr) CheckCuda(cudaStreamSynchronize(nullptr), what);
}

chorus_status Create(const chorus_device_context_create_args* args, chorus_device_context** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cuda create: out is NULL");
    *out = nullptr;
    sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_device_context_create_args, num_options),
                     "cuda create");
    if (args->num_options > 0) {
      Fail(CHORUS_INVALID_ARGUMENT, "cuda create: unknown option '",
           args->options && args->options[0].key ? args->options[0].key : "",
           "'; the cuda enumerator takes none (CUDA_VISIBLE_DEVICES picks the GPUs)");
    }
    auto ctx = std::make_unique<chorus_device_context>();
    const int count = CudaDeviceCount();
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop{};
      CheckCuda(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
      ctx->names.push_back("GPU:" + std::to_string(d) + " (" + prop.name + ")");
      char bus[32] = {};
      CheckCuda(cudaDeviceGetPCIBusId(bus, sizeof(bus), d), "cudaDeviceGetPCIBusId");
      ctx->bus_ids.push_back(bus);
      ctx->memory.push_back(prop.totalGlobalMem);
    }
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess &&
        cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
      ctx->description = "CUDA driver " + std::to_string(driver / 1000) + "." +
                         std::to_string(driver % 1000 / 10) + ", runtime " +
                         std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
    }
    if (count == 0) ctx->description = "no CUDA device: " + NoDeviceReason();
    // The peer-access matrix (NVLink or PCIe P2P): plugin.h 1.0 has no field for it; logged.
    for (int a = 0; a < count; ++a) {
      std::string row = "cuda: peer access from GPU:" + std::to_string(a) + ":";
      for (int b = 0; b < count; ++b) {
        int can = 0;
        if (a != b && cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) can = 0;
        row += a == b ? " -" : (can ? " y" : " n");
      }
      sdk::Log(CHORUS_LOG_DEBUG, row);
    }
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
      Fail(CHORUS_INVALID_ARGUMENT, "cuda device_count: NULL argument");
    }
    *count = static_cast<uint32_t>(ctx->names.size());
  });
}

chorus_status DeviceInfo(chorus_device_context* ctx, uint32_t index, chorus_device_info* info) {
  return Guard([&] {
    RequireDevice(ctx, index, "device_info");
    if (info == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cuda device_info: info is NULL");
    if (info->struct_size < CHORUS_STRUCT_SIZE(chorus_device_info, index)) {
      Fail(CHORUS_INVALID_ARGUMENT, "cuda device_info: struct_size is too small");
    }
    info->kind = CHORUS_DEVICE_GPU;
    info->index = index;
    if (CHORUS_HAS_FIELD(info, chorus_device_info, name)) info->name = ctx->names[index].c_str();
    if (CHORUS_HAS_FIELD(info, chorus_device_info, memory_bytes)) {
      info->memory_bytes = ctx->memory[index];
    }
    if (CHORUS_HAS_FIELD(info, chorus_device_info, numa_node)) info->numa_node = -1;
    if (CHORUS_HAS_FIELD(info, chorus_device_info, pci_bus_id)) {
      info->pci_bus_id = ctx->bus_ids[index].c_str();
    }
    if (CHORUS_HAS_FIELD(info, chorus_device_info, coords)) {
      for (int32_t& c : info->coords) c = -1;
    }
  });
}

chorus_status Allocate(chorus_device_context* ctx, uint32_t device, size_t bytes, void** out) {
  return Guard([&] {
    RequireDevice(ctx, device, "allocate");
    CurrentDeviceScope scope;
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cuda allocate: out is NULL");
    *out = nullptr;
    CheckCuda(cudaSetDevice(static_cast<int>(device)), "cudaSetDevice");
    CheckCuda(cudaMalloc(out, bytes == 0 ? 1 : bytes), "cudaMalloc");
  });
}

chorus_status Deallocate(chorus_device_context* ctx, uint32_t device, void* pointer) {
  return Guard([&] {
    RequireDevice(ctx, device, "deallocate");
    CurrentDeviceScope scope;
    if (pointer == nullptr) return;
    CheckCuda(cudaSetDevice(static_cast<int>(device)), "cudaSetDevice");
    CheckCuda(cudaFree(pointer), "cudaFree");
  });
}

chorus_status Copy(chorus_device_context* ctx, const chorus_copy_args* args) {
  return Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_copy_args, stream), "cuda copy");
    if (a.dst_device != CHORUS_HOST_DEVICE) RequireDevice(ctx, a.dst_device, "copy");
    if (a.src_device != CHORUS_HOST_DEVICE) RequireDevice(ctx, a.src_device, "copy");
    if (a.bytes == 0) return;
    if (a.dst == nullptr || a.src == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "cuda copy: NULL buffer");
    CurrentDeviceScope scope;
    const bool dst_host = a.dst_device == CHORUS_HOST_DEVICE;
    const bool src_host = a.src_device == CHORUS_HOST_DEVICE;
    if (!dst_host)
      CheckCuda(cudaSetDevice(static_cast<int>(a.dst_device)), "cudaSetDevice");
    else if (!src_host)
      CheckCuda(cudaSetDevice(static_cast<int>(a.src_device)), "cudaSetDevice");
    if (!dst_host && !src_host && a.dst_device != a.src_device) {
      CheckCuda(cudaMemcpyPeerAsync(a.dst, static_cast<int>(a.dst_device), a.src,
                                    static_cast<int>(a.src_device), a.bytes, StreamOf(a.stream)),
                "cudaMemcpyPeerAsync");
    } else {
      CheckCuda(cudaMemcpyAsync(a.dst, a.src, a.bytes, cudaMemcpyDefault, StreamOf(a.stream)),
                "cudaMemcpyAsync");
    }
    Finish(a.stream, "copy");
  });
}

chorus_status Reduce(chorus_device_context* ctx, const chorus_reduce_kernel_args* args) {
  return Guard([&] {
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_kernel_args, stream),
                                     "cuda reduce");
    RequireDevice(ctx, a.device, "reduce");
    sdk::RequireDtype(a.dtype, "cuda reduce");
    sdk::RequireReduceOp(a.op, "cuda reduce");
    if (a.count == 0) return;
    if (a.dst == nullptr || a.a == nullptr || a.b == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "cuda reduce: NULL buffer with count ", a.count);
    }
    CurrentDeviceScope scope;
    CheckCuda(cudaSetDevice(static_cast<int>(a.device)), "cudaSetDevice");
    CheckCuda(static_cast<cudaError_t>(
                  LaunchReduce(a.dst, a.a, a.b, a.count, a.dtype, a.op, StreamOf(a.stream))),
              "reduce kernel launch");
    Finish(a.stream, "reduce");
  });
}

chorus_status Divide(chorus_device_context* ctx, const chorus_divide_args* args) {
  return Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_divide_args, stream), "cuda divide");
    RequireDevice(ctx, a.device, "divide");
    sdk::RequireDtype(a.dtype, "cuda divide");
    if (a.divisor == 0) Fail(CHORUS_INVALID_ARGUMENT, "cuda divide: divisor is 0");
    if (a.count == 0) return;
    if (a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "cuda divide: data is NULL");
    CurrentDeviceScope scope;
    CheckCuda(cudaSetDevice(static_cast<int>(a.device)), "cudaSetDevice");
    CheckCuda(static_cast<cudaError_t>(
                  LaunchDivide(a.data, a.count, a.dtype, a.divisor, StreamOf(a.stream))),
              "divide kernel launch");
    Finish(a.stream, "divide");
  });
}

chorus_status Synchronize(chorus_device_context* ctx, uint32_t device, chorus_stream* stream) {
  return Guard([&] {
    RequireDevice(ctx, device, "synchronize");
    CurrentDeviceScope scope;
    CheckCuda(cudaSetDevice(static_cast<int>(device)), "cudaSetDevice");
    CheckCuda(cudaStreamSynchronize(StreamOf(stream)), "cudaStreamSynchronize");
  });
}

}  // namespace

namespace {

using CtxGetCurrent = CUresult (*)(CUcontext*);

// The driver's cuCtxGetCurrent, looked up through the runtime: the plugin does not link libcuda,
// which exists only where a driver is installed. NULL when it cannot be found.
CtxGetCurrent CtxGetCurrentFunction() {
  static const CtxGetCurrent function = []() -> CtxGetCurrent {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &found, CUDART_VERSION,
                                         cudaEnableDefault, &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<CtxGetCurrent>(found);
  }();
  return function;
}

}  // namespace

CurrentDeviceScope::CurrentDeviceScope() {
  // Only a device whose context the caller already has is restored: a thread without a current
  // context reads device 0 from cudaGetDevice, and setting that back would create a context on
  // GPU 0 in every process (memory, and a failure under EXCLUSIVE_PROCESS compute mode).
  if (CudaDeviceCount() == 0) return;
  const CtxGetCurrent get_current = CtxGetCurrentFunction();
  CUcontext current = nullptr;
  if (get_current == nullptr || get_current(&current) != CUDA_SUCCESS || current == nullptr) {
    return;
  }
  if (cudaGetDevice(&saved_) != cudaSuccess) {
    saved_ = -1;
    (void)cudaGetLastError();
  }
}

CurrentDeviceScope::~CurrentDeviceScope() {
  if (saved_ >= 0) cudaSetDevice(saved_);
}

int CudaDeviceCount() {
  std::call_once(g_count_once, [] {
    const cudaError_t error = cudaGetDeviceCount(&g_count);
    if (error != cudaSuccess) {
      g_count = 0;
      g_no_device_reason = std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
      cudaGetLastError();  // clear it, so later calls do not report it
    } else if (g_count == 0) {
      g_no_device_reason = "the CUDA driver reports no device";
    }
    if (g_count == 0) {
      sdk::Log(CHORUS_LOG_INFO, "cuda: no CUDA device (" + g_no_device_reason +
                                    "); the cuda enumerator "
                                    "has 0 devices and the nccl backends are unavailable");
    }
  });
  return g_count;
}

std::string NoDeviceReason() {
  CudaDeviceCount();
  return g_no_device_reason;
}

const chorus_device_enumerator_api* CudaDevicesTable() {
  static const chorus_device_enumerator_api table = {
      .struct_size = sizeof(chorus_device_enumerator_api),
      .platform = "cuda",
      .create = Create,
      .destroy = Destroy,
      .device_count = DeviceCount,
      .device_info = DeviceInfo,
      .allocate = Allocate,
      .deallocate = Deallocate,
      .copy = Copy,
      .reduce = Reduce,
      .divide = Divide,
      .synchronize = Synchronize,
      .describe = Describe,
      .context = nullptr,
  };
  return &table;
}

}  // namespace chorus::nccl
