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
// when neither is given), and a gloo::rendezvous::Context with the time-out set before
// connectFullMesh, which exchanges addresses through `store` (KvStoreAdapter) and connects one
// TCP pair to every other rank. Throws sdk::Error: CHORUS_INVALID_ARGUMENT for an address or
// interface Gloo cannot use (quoting Gloo), CHORUS_TIMEOUT when a rank does not arrive within
// timeout_ms, CHORUS_PEER_LOST when a peer goes away during the set-up.
std::shared_ptr<::gloo::Context> Connect(const chorus_kv_store& store, int rank, int size,
                                         int64_t timeout_ms, const CommunicatorOptions& options);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_CONNECT_H_
