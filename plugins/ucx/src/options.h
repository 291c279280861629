// options.h: the ucx transport's create options (chorus_option) and how they reach UCX.
#ifndef CHORUS_PLUGINS_UCX_OPTIONS_H_
#define CHORUS_PLUGINS_UCX_OPTIONS_H_

#include <chorus/plugin.h>
#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transport_path.h"

namespace chorus::ucx {

struct EndpointOptions {
  // UCP configuration variables (names without the UCX_ prefix) set for this endpoint only,
  // over what the UCX_* environment says: "tls" -> TLS, "net_devices" -> NET_DEVICES.
  std::vector<std::pair<std::string, std::string>> ucx_settings;
  // How long a wait spins on the worker after the last event it handled, then how long it goes
  // on spinning with sched_yield() between spins (a rank that shares its core lets the others
  // run; alone on its core it keeps the core, as ucx_perftest and MPI do), before it sleeps.
  int64_t spin_us = 50;
  int64_t yield_us = 1000;
  // How peers on this host are connected: option same_host, else CHORUS_UCX_SAME_HOST, else
  // shared memory (transport_path.h).
  SameHostMode same_host = kDefaultSameHostMode;
  // Prefix of this endpoint's keys in the rendezvous store.
  std::string store_prefix;
};

// Parses the options; INVALID_ARGUMENT naming an unknown key or a bad value (also a bad
// CHORUS_UCX_SAME_HOST where the option same_host does not override it). `address` is where the
// cluster spec says the other ranks reach this one (create args, 1.1; may be empty): a loopback
// address means every rank runs here, and UCX's network devices default to lo (so that UCX's tcp
// stays on 127.0.0.1) unless UCX_NET_DEVICES or the option net_devices says.
EndpointOptions ParseOptions(const chorus_option* options, size_t count, std::string_view address);

// Reads UCX's configuration (the UCX_* environment) and applies the settings; throws
// INVALID_ARGUMENT with UCX's words when UCX rejects one. The caller releases the result with
// ucp_config_release.
ucp_config_t* ReadConfig(const EndpointOptions& options);

// Whether the UCX_TLS in effect (option tls, else UCX_TLS) names shared-memory and loopback
// transports only (sm, posix, sysv, cma, self, ...): UCX then refuses peer error handling to a
// peer on this host, and logs an ERROR when asked.
bool SharedMemoryOnly(const EndpointOptions& options);

// UCX_TLS and UCX_*_DEVICES as this endpoint's UCX sees them: the options over the variables.
TransportSelection SelectionOf(const EndpointOptions& options);

// "UCX_TLS=tcp UCX_NET_DEVICES=lo" as this endpoint's UCX sees them, for error messages.
std::string DescribeTransportSettings(const EndpointOptions& options);

}  // namespace chorus::ucx

#endif  // CHORUS_PLUGINS_UCX_OPTIONS_H_
