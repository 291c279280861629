#include "host_services.h"

#include <atomic>
#include <chorus/plugin_sdk.hpp>

namespace chorus::ring_grpc {
namespace {

std::atomic<const chorus_host*> g_host{nullptr};

const chorus_host* Host() { return g_host.load(std::memory_order_acquire); }

}  // namespace

void SetHost(const chorus_host* host) {
  if (host != nullptr) {
    if (!CHORUS_HAS_FIELD(host, chorus_host, reduce_host) || host->log == nullptr ||
        host->log_enabled == nullptr || host->abort_requested == nullptr ||
        host->reduce_host == nullptr) {
      sdk::Fail(CHORUS_UNSUPPORTED,
                "ring-grpc needs the host's log, abort_requested and reduce_host services "
                "(chorus ABI 1.0); this core's chorus_host lacks one");
    }
  }
  g_host.store(host, std::memory_order_release);
}

bool LogEnabled(chorus_log_level level) {
  const chorus_host* host = Host();
  return host != nullptr && host->log_enabled(host->ctx, level) != 0;
}

void Log(chorus_log_level level, const std::string& message) {
  const chorus_host* host = Host();
  if (host != nullptr) host->log(host->ctx, level, message.c_str());
}

bool AbortRequested() {
  const chorus_host* host = Host();
  return host != nullptr && host->abort_requested(host->ctx) != 0;
}

void ReduceHost(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                chorus_reduce_op op) {
  if (count == 0) return;
  const chorus_host* host = Host();
  if (host == nullptr) sdk::Fail(CHORUS_INTERNAL, "ring-grpc used before init()");
  chorus_reduce_kernel_args args{};
  args.struct_size = sizeof(args);
  args.device = CHORUS_HOST_DEVICE;
  args.dst = dst;
  args.a = a;
  args.b = b;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  args.stream = nullptr;
  const chorus_status status = host->reduce_host(host->ctx, &args);
  if (status != CHORUS_OK) {
    sdk::Fail(status, "the core's reduce_host kernel failed on ", count, " elements (status ",
              static_cast<int>(status), ")");
  }
}

}  // namespace chorus::ring_grpc
