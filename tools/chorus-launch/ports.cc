#include "ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace chorus::launch {
namespace {

// The first port of the kernel's ephemeral range; 32768 (Linux's default) when unreadable.
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > 1024) return low;
  return 32768;
}

// Binds a new socket to 127.0.0.1:port (0: the kernel chooses); returns the fd and the port bound,
// or fd -1 with errno set.
std::pair<int, int> BindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {-1, 0};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return {-1, 0};
  }
  return {fd, ntohs(address.sin_port)};
}

}  // namespace

std::vector<int> PickFreePorts(int count) {
  // All sockets stay bound until every port is known, so the ports are distinct.
  std::vector<int> sockets;
  std::vector<int> ports;
  std::string error;
  const int high = EphemeralLow() - 1;
  const int low = std::max(10000, high - 15000);
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(low, high);
  for (int i = 0; i < count && error.empty(); ++i) {
    std::pair<int, int> bound{-1, 0};
    for (int attempt = 0; attempt < 64 && bound.first < 0 && low < high; ++attempt) {
      bound = BindLoopback(pick(random));
    }
    if (bound.first < 0) bound = BindLoopback(0);
    if (bound.first < 0) {
      error = std::string("binding 127.0.0.1: ") + strerror(errno);
      break;
    }
    sockets.push_back(bound.first);
    ports.push_back(bound.second);
  }
  for (int fd : sockets) close(fd);
  if (!error.empty()) {
    throw std::runtime_error("cannot find free ports on 127.0.0.1 (" + error +
                             "); pass --port-base to choose them");
  }
  return ports;
}

}  // namespace chorus::launch
