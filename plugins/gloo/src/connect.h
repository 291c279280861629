// Set-up of a communicator: a TCP device and a Gloo context connected to every other rank.
#ifndef CHORUS_PLUGINS_GLOO_CONNECT_H_
#define CHORUS_PLUGINS_GLOO_CONNECT_H_

#include <chorus/plugin.h>
#include <gloo/context.h>

#include <cstdint>
#include <memory>

#include "options.h"

namespace chorus::gloo_plugin {

// A gloo::transport::tcp device listening on options.hostname or options.interface (127.0.0.1
// when neither is given), and a Gloo context with one TCP pair to every other rank, with the
// time-out set before the pairs are made. The ranks exchange their pairs' addresses through
// `store` (KvStoreAdapter), connect them as Gloo's connectFullMesh would, and then check every
// pair against both ranks' reports (mesh_report.h): Gloo takes the first process that connects
// to a pair's listening socket for the peer. When a process that is not a rank did, every rank
// sets up again on new ports, up to 4 times in all. Throws sdk::Error: CHORUS_INVALID_ARGUMENT
// for an address or interface Gloo cannot use (quoting Gloo), CHORUS_TIMEOUT when a rank does
// not arrive within timeout_ms, CHORUS_PEER_LOST when a peer goes away during the set-up,
// CHORUS_UNAVAILABLE naming the outsider's address when one took a pair in every attempt.
std::shared_ptr<::gloo::Context> Connect(const chorus_kv_store& store, int rank, int size,
                                         int64_t timeout_ms, const CommunicatorOptions& options);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_CONNECT_H_
