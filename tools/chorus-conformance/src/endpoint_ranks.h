// Ranks with a transport endpoint each, for the Transport (interface 5) and Algorithm
// (interface 4) suites: threads of this process, or one rank per process of a job.
#ifndef CHORUS_CONFORMANCE_ENDPOINT_RANKS_H_
#define CHORUS_CONFORMANCE_ENDPOINT_RANKS_H_

#include <chorus/collective/transport_endpoint.h>
#include <chorus/rendezvous/kv_store.h>

#include <functional>
#include <memory>
#include <string>

#include "suite.h"

namespace chorus::conformance::internal {

// One rank's part in a check.
struct EndpointRank {
  int rank = 0;
  int size = 1;
  // How long a check waits for one request or a key of another rank (the kit's time-out).
  int64_t timeout_ms = 60000;
  TransportEndpoint* endpoint = nullptr;  // NULL after destroy()
  KvStore* sync = nullptr;                // shared by the ranks of the group, for the check's keys
  std::function<void()> destroy;          // destroys this rank's endpoint now (a rank that dies)
};
using EndpointBody = std::function<std::string(EndpointRank& rank)>;

// Runs `body` on every rank of a group of `size` over transport `api` of `plugin`: an endpoint
// per rank on rank threads (created and destroyed at once), or in job mode this process's rank
// over the job's store (then `size` is the job's size). A create answered UNSUPPORTED or
// UNAVAILABLE skips the check unless --require.
RanksOutcome RunEndpointRanks(const Suite& suite, const std::shared_ptr<PluginLibrary>& plugin,
                              const chorus_transport_api& api, int size, const EndpointBody& body);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_ENDPOINT_RANKS_H_
