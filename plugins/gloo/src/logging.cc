#include "logging.h"

#include <atomic>

namespace chorus::gloo_plugin {
namespace {

std::atomic<const chorus_host*> g_host{nullptr};

// The host only when it holds both logging functions.
const chorus_host* LoggingHost() {
  const chorus_host* host = g_host.load(std::memory_order_acquire);
  if (host == nullptr || !CHORUS_HAS_FIELD(host, chorus_host, log_enabled) ||
      host->log == nullptr || host->log_enabled == nullptr) {
    return nullptr;
  }
  return host;
}

}  // namespace

void SetHost(const chorus_host* host) { g_host.store(host, std::memory_order_release); }

bool LogEnabled(chorus_log_level level) {
  const chorus_host* host = LoggingHost();
  return host != nullptr && host->log_enabled(host->ctx, level) != 0;
}

void Log(chorus_log_level level, const std::string& message) {
  const chorus_host* host = LoggingHost();
  if (host != nullptr) host->log(host->ctx, level, message.c_str());
}

bool HostAbortRequested() {
  const chorus_host* host = g_host.load(std::memory_order_acquire);
  return host != nullptr && CHORUS_HAS_FIELD(host, chorus_host, abort_requested) &&
         host->abort_requested != nullptr && host->abort_requested(host->ctx) != 0;
}

}  // namespace chorus::gloo_plugin
