#include "base/socket_util.h"

#include <arpa/inet.h>
#include <chorus/base/error.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace chorus {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  // close() is not retried on EINTR: on Linux the fd is released even then.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  const Clock::time_point now = Clock::now();
  if (timeout.count() <= 0) return now;
  // Beyond ~100 years counts as forever (and would overflow the clock's nanoseconds).
  if (timeout > std::chrono::hours(24 * 365 * 100)) return Clock::time_point::max();
  return now + timeout;
}

int PollTimeoutMs(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

std::string ErrnoText(int err) {
  char buffer[256];
  // The GNU strerror_r returns the message, which may or may not be `buffer`.
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return strerror_r(err, buffer, sizeof(buffer));
#else
  if (strerror_r(err, buffer, sizeof(buffer)) != 0) return "errno " + std::to_string(err);
  return buffer;
#endif
}

void SetNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw Error(CHORUS_INTERNAL, "rendezvous: fcntl(O_NONBLOCK): " + ErrnoText(errno));
  }
}

void SetNoDelay(int fd) {
  const int one = 1;
  // Best effort: a socket without TCP_NODELAY is slower, not wrong.
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string ParseHostPort(std::string_view address, HostPort* out) {
  std::string_view host, port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos) {
      return "has a '[' without its ']' (write an IPv6 host as '[::1]:2222')";
    }
    if (close + 1 == address.size()) return "has no port (write it as '[::1]:2222')";
    if (address[close + 1] != ':') {
      return "has something between ']' and the port's ':' (write an IPv6 host as "
             "'[::1]:2222')";
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return "has no port";
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      // "::1:80" could be host ::1 and port 80, or host ::1:80 without a port.
      return "has an IPv6 host without brackets, which makes the port ambiguous (write it as '[" +
             std::string(host) + "]:" + std::string(port) + "')";
    }
  }
  if (host.find_first_of("[]") != std::string_view::npos) return "has a stray '[' or ']'";
  if (host.empty()) return "has no host";
  if (host.find_first_of(" \t\r\n") != std::string_view::npos) return "has white space in its host";
  if (port.empty()) return "has an empty port";
  if (port.find_first_not_of("0123456789") != std::string_view::npos) {
    return "has a port '" + std::string(port) + "' that is not a number";
  }
  // Leading zeros aside, more than 5 digits is out of range (and would overflow below).
  const std::string_view digits = port.substr(std::min(port.find_first_not_of('0'), port.size()));
  unsigned long number = 0;
  if (digits.size() <= 5) {
    for (const char c : digits) number = number * 10 + static_cast<unsigned long>(c - '0');
  }
  if (digits.size() > 5 || number < 1 || number > 65535) {
    return "has a port " + std::string(port) + " outside 1..65535";
  }
  out->host = std::string(host);
  out->port = static_cast<uint16_t>(number);
  return "";
}

std::string JoinHostPort(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) ::freeaddrinfo(head);
  }
};

// Resolves host:port (an IPv6 host with or without brackets); returns 0 or a getaddrinfo error
// code.
int Resolve(std::string host, uint16_t port, bool passive, AddrInfoList* list) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const bool any = passive && host.empty();
  const std::string service = std::to_string(port);
  return ::getaddrinfo(any ? nullptr : host.c_str(), service.c_str(), &hints, &list->head);
}

// Waits until `fd` is ready for `events` or `deadline` passes. 1 = ready, 0 = timed out,
// -1 = error (errno set).
int WaitReady(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (n > 0) return 1;
    if (n == 0) {
      if (Clock::now() >= deadline) return 0;
      continue;  // poll's millisecond rounding woke us a little early
    }
    if (errno != EINTR) return -1;
  }
}

bool IsClosedError(int err) { return err == ECONNRESET || err == EPIPE || err == ENOTCONN; }

}  // namespace

UniqueFd ListenTcp(const std::string& host, uint16_t port) {
  const std::string where = JoinHostPort(host, port);
  AddrInfoList addresses;
  if (const int rc = Resolve(host, port, /*passive=*/true, &addresses); rc != 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "rendezvous: cannot serve the tcp store on " + where +
                                             ": cannot resolve the host: " + gai_strerror(rc));
  }
  std::string last_error = "no address";
  for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
    UniqueFd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd.valid()) {
      last_error = "socket: " + ErrnoText(errno);
      continue;
    }
    const int one = 1;
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const bool bound = ::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0;
    const bool listening = bound && ::listen(fd.get(), SOMAXCONN) == 0;
    if (listening) return fd;
    const int err = errno;
    // A port in use ends the search: listening on another of the host's addresses (::1 when
    // 127.0.0.1 is taken) would leave clients that resolve the taken one talking to the other
    // program.
    if (err == EADDRINUSE) {
      throw Error(CHORUS_UNAVAILABLE, "rendezvous: cannot serve the tcp store on " + where +
                                          ": port " + std::to_string(port) +
                                          " is in use by another program (" +
                                          (bound ? "listen: " : "bind: ") + ErrnoText(err) +
                                          "); stop that program or choose a free port");
    }
    last_error = (bound ? "listen: " : "bind: ") + ErrnoText(err);
  }
  throw Error(CHORUS_UNAVAILABLE,
              "rendezvous: cannot serve the tcp store on " + where + ": " + last_error);
}

uint16_t LocalPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw Error(CHORUS_INTERNAL, "rendezvous: getsockname: " + ErrnoText(errno));
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

UniqueFd ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline,
                    std::string* error) {
  AddrInfoList addresses;
  if (const int rc = Resolve(host, port, /*passive=*/false, &addresses); rc != 0) {
    *error = std::string("cannot resolve the host: ") + gai_strerror(rc);
    return UniqueFd();
  }
  *error = "no address";
  for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
    UniqueFd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd.valid()) {
      *error = "socket: " + ErrnoText(errno);
      continue;
    }
    // A non-blocking connect bounded by poll, so a host that drops SYNs cannot hold us for the
    // kernel's ~2 minutes. EINTR leaves the connect in progress, like EINPROGRESS.
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS && errno != EINTR) {
        *error = ErrnoText(errno);
        continue;
      }
      const int ready = WaitReady(fd.get(), POLLOUT, deadline);
      if (ready <= 0) {
        *error = ready == 0 ? "connect timed out" : "poll: " + ErrnoText(errno);
        continue;
      }
      int so_error = 0;
      socklen_t length = sizeof(so_error);
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &length) != 0) so_error = errno;
      if (so_error != 0) {
        *error = ErrnoText(so_error);
        continue;
      }
    }
    SetNoDelay(fd.get());
    return fd;
  }
  return UniqueFd();
}

IoResult SendAll(int fd, const void* data, size_t size, Clock::time_point deadline, int* err) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (n > 0) {
      bytes += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int ready = WaitReady(fd, POLLOUT, deadline);
      if (ready == 0) return IoResult::kTimedOut;
      if (ready < 0) {
        *err = errno;
        return IoResult::kError;
      }
      continue;
    }
    *err = n < 0 ? errno : EPIPE;
    return IsClosedError(*err) ? IoResult::kClosed : IoResult::kError;
  }
  return IoResult::kOk;
}

IoResult RecvAll(int fd, void* data, size_t size, Clock::time_point deadline, int* err) {
  auto* bytes = static_cast<uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, bytes, size, 0);
    if (n > 0) {
      bytes += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoResult::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const int ready = WaitReady(fd, POLLIN, deadline);
      if (ready == 0) return IoResult::kTimedOut;
      if (ready < 0) {
        *err = errno;
        return IoResult::kError;
      }
      continue;
    }
    *err = errno;
    return IsClosedError(*err) ? IoResult::kClosed : IoResult::kError;
  }
  return IoResult::kOk;
}

namespace {

std::string EndpointText(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      ::inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    }
    return std::string(text) + ":" + std::to_string(ntohs(v6->sin6_port));
  }
  return "";
}

}  // namespace

std::string LocalEndpoint(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  return EndpointText(address);
}

std::string PeerEndpoint(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  return EndpointText(address);
}

}  // namespace chorus
