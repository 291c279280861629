// What this process's own TCP sockets at one local address are doing: whether one still listens
// there and which connection one accepted there. The set-up check (connect.cc, mesh_report.h)
// reads this for each of Gloo's pairs, whose sockets Gloo keeps to itself.
#ifndef CHORUS_PLUGINS_GLOO_OWN_SOCKETS_H_
#define CHORUS_PLUGINS_GLOO_OWN_SOCKETS_H_

#include <sys/socket.h>

#include <string>

namespace chorus::gloo_plugin {

struct SocketsAt {
  bool listening = false;  // a socket listens at the address
  std::string accepted;    // the far end of a connection accepted there ("" if none)
};

// Looks at every open descriptor of this process (/proc/self/fd) that is a TCP socket bound to
// `local`. A descriptor another thread closes meanwhile is skipped.
SocketsAt OwnSocketsAt(const sockaddr_storage& local);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_OWN_SOCKETS_H_
