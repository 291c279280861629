// The builtin plugin's transport "tcp" (plugin.h interface 5): TcpEndpoint behind the C table.
// Options: "host", the address to listen on and publish (default: the create args' address, the
// cluster spec's, else 127.0.0.1); "store_prefix", put before the keys it uses in the rendezvous
// store (default none).
#ifndef CHORUS_CORE_TCP_TRANSPORT_H_
#define CHORUS_CORE_TCP_TRANSPORT_H_

#include <chorus/plugin.h>

namespace chorus::internal {

inline constexpr const char* kTcpTransportName = "tcp";

const chorus_transport_api* TcpTransportTable();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_TCP_TRANSPORT_H_
