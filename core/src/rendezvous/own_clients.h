// The tcp store connections this process holds, by their local endpoint ("address:port"), so
// that a server in the same process can tell them from other members' connections: a server
// that is destroyed waits for the others to leave, never for its own process's
// (TcpStoreServer::Start).
#ifndef CHORUS_RENDEZVOUS_OWN_CLIENTS_H_
#define CHORUS_RENDEZVOUS_OWN_CLIENTS_H_

#include <string>

namespace chorus::tcp_store {

// Thread-safe. An empty endpoint is ignored.
void AddOwnClient(const std::string& endpoint);
void RemoveOwnClient(const std::string& endpoint);
bool IsOwnClient(const std::string& endpoint);

// This process, as HELLO names it to the server: "pid N on HOST, <random>" (the random part
// tells apart two processes that reuse one pid, e.g. in two containers). Computed per pid, so a
// forked child gets its own.
std::string ThisProcess();

}  // namespace chorus::tcp_store

#endif  // CHORUS_RENDEZVOUS_OWN_CLIENTS_H_
