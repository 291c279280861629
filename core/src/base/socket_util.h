// Small POSIX socket helpers for the TCP rendezvous store: an owning fd, deadlines, listening,
// connecting with a deadline, and sending/receiving whole buffers on non-blocking sockets.
// Every call retries on EINTR and never raises SIGPIPE (MSG_NOSIGNAL).
#ifndef CHORUS_SOCKET_UTIL_H_
#define CHORUS_SOCKET_UTIL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace chorus {

// A network address split in two: the host without brackets ("::1", "127.0.0.1", "node-3") and
// the port.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// Parses "host:port" or "[IPv6 address]:port" with a port in 1..65535 into *out. Returns "" on
// success, else what is wrong, worded to follow "address 'X' " (e.g. "has no port"): an IPv6
// host must be in brackets, since "::1:80" could be host ::1 port 80 or host ::1:80 alone.
std::string ParseHostPort(std::string_view address, HostPort* out);

// "host:port", with brackets around an IPv6 host (one that holds a ':').
std::string JoinHostPort(const std::string& host, uint16_t port);

// Closes the fd it owns.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

using Clock = std::chrono::steady_clock;

// now + timeout, saturating: a huge time-out (the C table's "forever") gives time_point::max().
Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout);
// Milliseconds until `deadline` for poll(), rounded up; -1 for time_point::max(); 0 when past.
int PollTimeoutMs(Clock::time_point deadline);

// strerror(err), thread-safe.
std::string ErrnoText(int err);

void SetNonBlocking(int fd);
void SetNoDelay(int fd);

// A non-blocking socket listening on host:port ("" or "0.0.0.0" for every interface, port 0 for
// any free port; an IPv6 host with or without brackets). Throws Error(CHORUS_UNAVAILABLE) when
// it cannot bind (its message names a port in use and the fix), Error(CHORUS_INVALID_ARGUMENT)
// when the host does not resolve.
UniqueFd ListenTcp(const std::string& host, uint16_t port);
// The port a bound socket listens on.
uint16_t LocalPort(int fd);

// "address:port" of a socket's own end (getsockname) or of its peer (getpeername), with an
// IPv4-mapped IPv6 address written as IPv4, so both ends of one connection name it alike; ""
// when the socket has no such address.
std::string LocalEndpoint(int fd);
std::string PeerEndpoint(int fd);

// One attempt to connect to host:port, bounded by `deadline`. Returns a non-blocking connected
// socket, or an invalid fd with the reason in *error.
UniqueFd ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline,
                    std::string* error);

enum class IoResult {
  kOk,
  kClosed,    // the peer closed or reset the connection
  kTimedOut,  // the deadline passed first
  kError,     // another socket error; *err holds errno
};

// Sends or receives exactly `size` bytes on a non-blocking socket, waiting in poll() up to
// `deadline`.
IoResult SendAll(int fd, const void* data, size_t size, Clock::time_point deadline, int* err);
IoResult RecvAll(int fd, void* data, size_t size, Clock::time_point deadline, int* err);

}  // namespace chorus

#endif  // CHORUS_SOCKET_UTIL_H_
