#include "own_sockets.h"

#include <dirent.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "mesh_report.h"

namespace chorus::gloo_plugin {

SocketsAt OwnSocketsAt(const sockaddr_storage& local) {
  SocketsAt found;
  const std::string wanted = AddressText(local);
  struct CloseDir {
    void operator()(DIR* dir) const { ::closedir(dir); }
  };
  std::unique_ptr<DIR, CloseDir> dir(::opendir("/proc/self/fd"));
  if (!dir) return found;
  const int own = ::dirfd(dir.get());
  while (const dirent* entry = ::readdir(dir.get())) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    const int socket = static_cast<int>(fd);
    int type = 0;
    socklen_t length = sizeof type;
    if (::getsockopt(socket, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) {
      continue;  // not a socket, or not a stream one
    }
    sockaddr_storage name{};
    length = sizeof name;
    if (::getsockname(socket, reinterpret_cast<sockaddr*>(&name), &length) != 0 ||
        (name.ss_family != AF_INET && name.ss_family != AF_INET6) || AddressText(name) != wanted) {
      continue;
    }
    int listens = 0;
    length = sizeof listens;
    if (::getsockopt(socket, SOL_SOCKET, SO_ACCEPTCONN, &listens, &length) == 0 && listens != 0) {
      found.listening = true;
      continue;
    }
    sockaddr_storage peer{};
    length = sizeof peer;
    if (::getpeername(socket, reinterpret_cast<sockaddr*>(&peer), &length) == 0) {
      found.accepted = AddressText(peer);
    }
  }
  return found;
}

}  // namespace chorus::gloo_plugin
