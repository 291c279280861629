#include "runtime/host.h"

#include <chorus/runtime/plugin_library.h>

#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <cstdlib>
#include <cstring>

#include "base/abort_scope.h"
#include "base/host_kernels.h"
#include "base/job_secret.h"
#include "base/logging.h"

namespace chorus::internal {
namespace {

spdlog::level::level_enum ToSpdlog(chorus_log_level level) {
  switch (level) {
    case CHORUS_LOG_TRACE:
      return spdlog::level::trace;
    case CHORUS_LOG_DEBUG:
      return spdlog::level::debug;
    case CHORUS_LOG_INFO:
      return spdlog::level::info;
    case CHORUS_LOG_WARN:
      return spdlog::level::warn;
    case CHORUS_LOG_ERROR:
    default:
      return spdlog::level::err;
  }
  return spdlog::level::err;
}

void HostLog(void* ctx, chorus_log_level level, const char* message) {
  const auto* self = static_cast<const PluginHost*>(ctx);
  Log().log(ToSpdlog(level), "[{}] {}", self->plugin_name(), message ? message : "(null)");
}

int HostLogEnabled(void*, chorus_log_level level) { return Log().should_log(ToSpdlog(level)); }

int HostAbortRequested(void*) { return AbortRequested() ? 1 : 0; }

void* HostAllocate(void*, size_t bytes, size_t alignment) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

void HostDeallocate(void*, void* pointer) { std::free(pointer); }

chorus_status HostReduce(void*, const chorus_reduce_kernel_args* args) {
  return sdk::Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_kernel_args, op), "reduce_host");
    ReduceHost(a.dst, a.a, a.b, a.count, a.dtype, a.op);
  });
}

int HostJobSecretPresent(void*) {
  try {
    return JobSecret::FromEnvironment().present() ? 1 : 0;
  } catch (const std::exception& e) {
    // A secret is set but cannot be used (too short, both variables, a file others can read):
    // fail closed. The plugin's listener then asks for proofs, and prove_job_secret fails with
    // this reason, naming the variable, instead of the job running unauthenticated.
    Log().error("{}", e.what());
    return 1;
  }
}

chorus_status HostProveJobSecret(void*, const char* role, const void* message, size_t size,
                                 uint8_t* out) {
  return sdk::Guard([&] {
    if (role == nullptr || out == nullptr || (message == nullptr && size != 0)) {
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "prove_job_secret: role and out must not be NULL");
    }
    const JobSecret secret = JobSecret::FromEnvironment();
    if (!secret.present()) {
      sdk::Fail(CHORUS_UNAVAILABLE,
                "prove_job_secret: the job has no secret (CHORUS_JOB_SECRET or "
                "CHORUS_JOB_SECRET_FILE)");
    }
    const Digest256 proof =
        secret.Prove(role, {std::string_view(static_cast<const char*>(message), size)});
    std::memcpy(out, proof.data(), proof.size());
  });
}

std::atomic<const chorus_host_collectives*>& HostCollectivesSlot() {
  static std::atomic<const chorus_host_collectives*> table{nullptr};
  return table;
}

}  // namespace

void RegisterHostCollectives(const chorus_host_collectives* table) {
  HostCollectivesSlot().store(table, std::memory_order_release);
}

PluginHost::PluginHost(std::string plugin_name) : plugin_name_(std::move(plugin_name)) {
  host_.struct_size = sizeof(chorus_host);
  host_.abi_major = CHORUS_ABI_MAJOR;
  host_.abi_minor = CHORUS_ABI_MINOR;
  host_.ctx = this;
  host_.log = HostLog;
  host_.log_enabled = HostLogEnabled;
  host_.abort_requested = HostAbortRequested;
  host_.allocate = HostAllocate;
  host_.deallocate = HostDeallocate;
  host_.reduce_host = HostReduce;
  host_.collectives = HostCollectivesSlot().load(std::memory_order_acquire);
  host_.job_secret_present = HostJobSecretPresent;
  host_.prove_job_secret = HostProveJobSecret;
}

}  // namespace chorus::internal

namespace chorus {

const chorus_host* CoreHost() {
  static const internal::PluginHost host("plugin");
  return host.host();
}

void RequestAbort() { internal::RaiseProcessAbort(); }

}  // namespace chorus
