// transport_path.h: which path a peer's bytes take through UCX, and the transport's AUTO score
// from it. UCX picks its transports per peer from what UCX_TLS (and UCX_*_DEVICES) allow and what
// the endpoint asks of them: UCP_ERR_HANDLING_MODE_PEER (peer failure handling) rules out UCX's
// shared-memory transports, so a same-host peer then goes over tcp loopback (or RDMA loopback).
// The plugin lists UCT's resources once per process (uct_query_components and friends) and
// filters them as UCP does (ucp_context.c: ucp_is_resource_enabled, ucp_tl_aliases).
#ifndef CHORUS_PLUGINS_UCX_TRANSPORT_PATH_H_
#define CHORUS_PLUGINS_UCX_TRANSPORT_PATH_H_

#include <chorus/plugin.h>
#include <ucp/api/ucp_def.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::ucx {

// How the endpoint connects a peer on its own host (option same_host, else CHORUS_UCX_SAME_HOST).
enum class SameHostMode {
  // Without UCX's peer failure handling, so that UCX may use shared memory (posix, sysv, cma);
  // a dead peer is noticed through its process and its "closed" key. Only where UCX_TLS leaves
  // UCX shared-memory transports that carry every message without tcp (SharedMemoryCarriesAlone);
  // else as kPeerFailure.
  kSharedMemory,
  // With UCX's peer failure handling (UCP_ERR_HANDLING_MODE_PEER): tcp (or RDMA) loopback.
  kPeerFailure,
};

constexpr const char* kSameHostVariable = "CHORUS_UCX_SAME_HOST";
constexpr SameHostMode kDefaultSameHostMode = SameHostMode::kSharedMemory;

// "shared_memory" or "peer_failure"; INVALID_ARGUMENT naming `source` (the option or the variable)
// and both values otherwise.
SameHostMode ParseSameHostMode(std::string_view value, std::string_view source);
const char* SameHostModeName(SameHostMode mode);
// CHORUS_UCX_SAME_HOST, or the default when it is unset or empty; throws as ParseSameHostMode.
SameHostMode SameHostModeFromEnvironment();

// One UCT transport on one device, as uct_md_query_tl_resources lists it.
struct UcxResource {
  enum class DeviceType { kNetwork, kSharedMemory, kAccelerator, kSelf };
  std::string transport;  // "tcp", "posix", "rc_mlx5", ...
  std::string device;     // "eth0", "lo", "memory", "mlx5_0:1", ...
  DeviceType type = DeviceType::kNetwork;
};

// Every transport UCT can open in this process (UCX_TLS does not filter this list), listed once
// per process and kept; `error` says why the list is missing when UCT's query failed.
struct ResourceQuery {
  std::vector<UcxResource> resources;
  std::optional<std::string> error;
};
const ResourceQuery& ProcessResources();

// What UCX is told to use: UCX_TLS and UCX_{NET,SHM,ACC,SELF}_DEVICES (nullopt: unset, "all").
struct TransportSelection {
  std::optional<std::string> tls;
  std::optional<std::string> net_devices, shm_devices, acc_devices, self_devices;
};
// The UCX_* variables of this process's environment.
TransportSelection SelectionFromEnvironment();

// The resources UCP enables under `selection` that may carry data (an ":aux" transport, wire-up
// only, is left out), by UCX's rules: a list, "^list" excluding, "all", aliases (sm, shm, mm,
// ib, rc, dc, ud, ...).
std::vector<UcxResource> EnabledResources(const std::vector<UcxResource>& all,
                                          const TransportSelection& selection);

// Whether, connected without peer failure handling, a same-host peer's messages take only shared
// memory: a shared-memory transport for messages (posix, sysv, xpmem) and, where tcp is enabled
// too, one for large messages (cma, knem). UCX 1.13 otherwise puts tcp beside them (ucx_info -e
// -P intra: tcp,posix gives posix for messages and tcp for rendezvous), and its tcp asserts on a
// refused connection without peer failure handling.
bool SharedMemoryCarriesAlone(const std::vector<UcxResource>& enabled);

// Whether UCX gave `ep` a tcp lane (ucp_ep_print_info's "lane[i]: ... tcp/<device>" lines): the
// check, after connecting a same-host peer without peer failure handling, that UCX did not put
// tcp under it after all.
bool LanesUseTcp(ucp_ep_h ep);

// The kind of link a pair of ranks has.
enum class UcxPath { kNone, kTcp, kSharedMemory, kRdma };
const char* UcxPathName(UcxPath path);
// A peer on this host: shared memory where `mode` and the transports allow it; else what UCX's
// peer failure handling leaves (RDMA loopback, else tcp loopback, else shared memory where UCX
// refuses peer failure handling and the endpoint connects without it).
UcxPath SameHostPath(const std::vector<UcxResource>& enabled, SameHostMode mode);
// A peer on another host: RDMA (rc, dc, ud, ...), else tcp on a device other than lo.
UcxPath CrossHostPath(const std::vector<UcxResource>& enabled);

// The AUTO score of one path: shared memory 30, RDMA 40, tcp 8 (below the core's tcp, 10: on 2
// cores ring@ucx over tcp loopback ran at 0.5-1.2x core_ring's speed), none 0.
uint32_t PathScore(UcxPath path);

// The transport's score from explicit inputs: 0 but for AUTO; one host: the same-host path; one
// rank per host: the cross-host path; otherwise the lower of the two (a ring is as slow as its
// slowest link).
uint32_t ScoreFromPaths(UcxPath same_host, UcxPath cross_host, const chorus_score_args& args);
uint32_t ScoreFromResources(const std::vector<UcxResource>& enabled, SameHostMode mode,
                            const chorus_score_args& args);

// The score the plugin declares: ScoreFromResources over this process's resources and
// environment, evaluated once per process (every later call returns the first answer's inputs).
// 8 when UCT's query failed; 0 when CHORUS_UCX_SAME_HOST is not a valid value.
uint32_t ProcessScore(const chorus_score_args& args);

}  // namespace chorus::ucx

#endif  // CHORUS_PLUGINS_UCX_TRANSPORT_PATH_H_
