#include "ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace chorus::launch {

std::vector<int> PickFreePorts(int count) {
  // All sockets stay bound until every port is known, so the kernel hands out distinct ones.
  std::vector<int> sockets;
  std::vector<int> ports;
  std::string error;
  for (int i = 0; i < count && error.empty(); ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = std::string("socket: ") + strerror(errno);
      break;
    }
    sockets.push_back(fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof(address);
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      error = std::string("binding 127.0.0.1:0: ") + strerror(errno);
      break;
    }
    ports.push_back(ntohs(address.sin_port));
  }
  for (int fd : sockets) close(fd);
  if (!error.empty()) {
    throw std::runtime_error("cannot find free ports on 127.0.0.1 (" + error +
                             "); pass --port-base to choose them");
  }
  return ports;
}

}  // namespace chorus::launch
