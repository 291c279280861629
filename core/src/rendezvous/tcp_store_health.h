// The health request of the TCP store (tcp_store::Op::kHealth), for JobHealth.
#ifndef CHORUS_RENDEZVOUS_TCP_STORE_HEALTH_H_
#define CHORUS_RENDEZVOUS_TCP_STORE_HEALTH_H_

#include <chorus/rendezvous/kv_store.h>

#include <chrono>

#include "rendezvous/tcp_store_protocol.h"

namespace chorus::tcp_store {

// Asks the server of `store` (a connection ConnectTcpStore returned, announced by name) which
// members are silent and which were lost; the request is also this connection's heartbeat, and
// marks the connection as one. Throws Error(CHORUS_TIMEOUT) when the server did not answer
// within `answer_within` and Error(CHORUS_PEER_LOST) when the connection closed or broke; either
// way the connection is dropped. Error(CHORUS_INVALID_ARGUMENT) for another kind of store.
HealthReport ReadHealth(KvStore& store, std::chrono::milliseconds answer_within);

}  // namespace chorus::tcp_store

#endif  // CHORUS_RENDEZVOUS_TCP_STORE_HEALTH_H_
