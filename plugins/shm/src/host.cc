#include "host.h"

#include <atomic>
#include <chorus/plugin_sdk.hpp>

namespace chorus::shm {
namespace {

std::atomic<const chorus_host*> g_host{nullptr};

}  // namespace

void SetHost(const chorus_host* host) { g_host.store(host, std::memory_order_release); }

void Log(chorus_log_level level, const std::string& message) {
  const chorus_host* host = g_host.load(std::memory_order_acquire);
  if (host == nullptr || host->log == nullptr || host->log_enabled == nullptr) return;
  if (host->log_enabled(host->ctx, level) != 0) host->log(host->ctx, level, message.c_str());
}

bool HostAbortRequested() {
  const chorus_host* host = g_host.load(std::memory_order_acquire);
  return host != nullptr && host->abort_requested != nullptr &&
         host->abort_requested(host->ctx) != 0;
}

void Reduce(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
            chorus_reduce_op op) {
  if (count == 0) return;
  const chorus_host* host = g_host.load(std::memory_order_acquire);
  if (host == nullptr) sdk::Fail(CHORUS_INTERNAL, "shm: used before init()");
  chorus_reduce_kernel_args args{};
  args.struct_size = sizeof(args);
  args.device = CHORUS_HOST_DEVICE;
  args.dst = dst;
  args.a = a;
  args.b = b;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  const chorus_status status = host->reduce_host(host->ctx, &args);
  if (status != CHORUS_OK) sdk::Fail(status, "shm: the host's reduce kernel failed");
}

}  // namespace chorus::shm
