#include "connect.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <ifaddrs.h>
#include <sys/socket.h>

#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <csignal>
#include <set>
#include <string>

#include "gloo_errors.h"
#include "kv_store_adapter.h"

namespace chorus::gloo_plugin {
namespace {

// Checked here rather than left to Gloo: Gloo's lookup throws for a missing interface without
// freeing its getifaddrs() list (a leak LeakSanitizer reports), and its message does not say
// which interfaces exist.
void CheckInterfaceExists(const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return;  // let Gloo report it
  std::set<std::string> with_address;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    const int family = entry->ifa_addr->sa_family;
    if (family == AF_INET || family == AF_INET6) with_address.insert(entry->ifa_name);
  }
  ::freeifaddrs(list);
  if (with_address.count(name) != 0) return;
  std::string names;
  for (const auto& n : with_address) names += (names.empty() ? "" : ", ") + n;
  sdk::Fail(CHORUS_INVALID_ARGUMENT, "gloo create: option interface=", name,
            " names no network interface with an IP address here; the interfaces are: ", names);
}

std::shared_ptr<::gloo::transport::Device> CreateTcpDevice(const CommunicatorOptions& options) {
  ::gloo::transport::tcp::attr attr;
  std::string where;
  if (!options.interface.empty()) {
    CheckInterfaceExists(options.interface);
    attr.iface = options.interface;
    where = "interface=" + options.interface;
  } else {
    attr.hostname = options.hostname.empty() ? "127.0.0.1" : options.hostname;
    where = "hostname=" + attr.hostname;
  }
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "gloo create: cannot listen on ", where,
              ": Gloo: ", e.what());
  }
}

// Gloo's TCP pairs write with writev(), which raises SIGPIPE when a peer has died: the default
// action would kill this process before Gloo can report the closed connection as PEER_LOST. As
// gRPC does, ignore SIGPIPE unless the application installed a handler of its own.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      (current.sa_flags & SA_SIGINFO) == 0) {
    ::signal(SIGPIPE, SIG_IGN);
    sdk::Log(CHORUS_LOG_DEBUG,
             "gloo: SIGPIPE set to ignored, so a dead peer is an error, not a kill");
  }
}

}  // namespace

std::shared_ptr<::gloo::Context> Connect(const chorus_kv_store& store, int rank, int size,
                                         int64_t timeout_ms, const CommunicatorOptions& options) {
  IgnoreSigpipeUnlessHandled();
  std::shared_ptr<::gloo::transport::Device> device = CreateTcpDevice(options);
  const std::string what =
      "gloo create (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  try {
    auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
    // Before connecting: the pairs take their time-out from the context when they are made.
    context->setTimeout(std::chrono::milliseconds(timeout_ms));
    KvStoreAdapter adapter(store, timeout_ms, rank, size);
    context->connectFullMesh(adapter, device);
    if (sdk::LogEnabled(CHORUS_LOG_DEBUG)) {
      sdk::Log(CHORUS_LOG_DEBUG, what + ": connected over " + device->str() + ", all_reduce " +
                                     AlgorithmName(options.algorithm));
    }
    return context;
  } catch (...) {
    throw TranslateCurrentException(what, timeout_ms);
  }
}

}  // namespace chorus::gloo_plugin
