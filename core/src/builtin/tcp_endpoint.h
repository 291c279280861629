// The core's TCP transport endpoint: one rank's connections to every other rank of a job (a full
// mesh over loopback or a network), with non-blocking sends and receives matched per (peer, tag)
// in FIFO order.
//
// Wire format, per connection: a handshake (magic, version, rank, size) each way, then messages
// of a 16-byte header {tag, bytes} (little-endian u64s) followed by `bytes` of payload.
//
// Progress: one thread per endpoint runs poll() over every peer's socket and a wake-up eventfd.
// A caller waiting on a message of up to 64 KiB first spins, polling the sockets itself
// (PollFromCaller) until 50 us after the last poll that moved data, so that a message that comes
// soon completes without two thread hops; meanwhile, and for 1 ms after a spin got its message,
// the progress thread stands back (CallerProgress::ProgressThreadStandsBack). A caller does not
// spin when this host runs more of the job's ranks than this process has cpus (a spinning rank
// would keep a core from the rank it waits for).
// One thread rather than one per peer because the ring algorithm keeps only two peers busy at a
// time, a single thread needs no ordering between threads that share a socket, and abort or
// shutdown has one thread to stop. Sends start on the caller's thread (a non-blocking write) and
// the progress thread finishes whatever the socket did not take at once. Receives land directly in
// the caller's buffer when posted before the data arrives; otherwise the message is read into a
// buffer of its own (so a peer never blocks on a receive posted late) and copied when the
// receive is posted.
//
// Failure: a peer whose socket reports end-of-file or an error is lost; every pending and later
// operation with it fails with CHORUS_PEER_LOST (messages it sent before closing are still
// delivered). Abort() fails everything with CHORUS_ABORTED and shuts every socket down, so the
// peers see this rank leave. The host's abort flag is polled every 50 ms and acts as Abort().
#ifndef CHORUS_CORE_TCP_ENDPOINT_H_
#define CHORUS_CORE_TCP_ENDPOINT_H_

#include <chorus/plugin.h>
#include <poll.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/socket_util.h"
#include "builtin/core_request.h"

namespace chorus {
class JobSecret;
}  // namespace chorus

namespace chorus::internal {

struct TcpEndpointOptions {
  // The address to listen on and publish to the peers: an IPv4/IPv6 address or a host name.
  std::string host = "127.0.0.1";
  // Put before every key this endpoint writes or reads in the store ("" = none), so that a
  // second endpoint over the same store does not read the first one's stale addresses.
  std::string store_prefix;
};

class TcpEndpoint {
 public:
  // Listens on an ephemeral port of options.host, publishes "<store_prefix>tcp/addr/<rank>" in
  // `store`, and
  // connects to every other rank (the lower rank connects), all within timeout_ms (negative:
  // no limit). Throws sdk::Error: TIMEOUT naming the rank that did not arrive, INVALID_ARGUMENT
  // when a peer was started with another size.
  static std::unique_ptr<TcpEndpoint> Create(int rank, int size, const chorus_kv_store& store,
                                             int64_t timeout_ms, const TcpEndpointOptions& options);

  // Stops the progress thread, fails whatever is still pending with CHORUS_ABORTED, and closes
  // every connection (the peers see this rank leave).
  ~TcpEndpoint();
  TcpEndpoint(const TcpEndpoint&) = delete;
  TcpEndpoint& operator=(const TcpEndpoint&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Start a send or a receive of exactly `bytes`; the buffer is borrowed until the request
  // completes. Throw sdk::Error when the operation cannot start (a bad peer, a lost peer, an
  // aborted endpoint); a receive whose size differs from the message's completes with
  // CHORUS_INVALID_ARGUMENT.
  std::shared_ptr<CoreRequest> Send(int peer, uint64_t tag, const void* data, size_t bytes);
  std::shared_ptr<CoreRequest> Recv(int peer, uint64_t tag, void* data, size_t bytes);

  // Fails every pending and later operation with CHORUS_ABORTED. Safe from any thread.
  void Abort();

 private:
  struct PendingSend;
  struct PendingRecv;
  struct BufferedMessage;
  struct Peer;

  TcpEndpoint(int rank, int size);
  void Connect(const chorus_kv_store& store, int64_t timeout_ms, const TcpEndpointOptions& options);
  void AdmitLowerRanks(int listener, const JobSecret& secret, Clock::time_point deadline,
                       int64_t timeout_ms);
  void ProveToHigherRank(int peer, const JobSecret& secret, const std::string& my_challenge,
                         Clock::time_point deadline);
  void ProgressLoop();
  bool ProgressOnce();  // false when the loop should end
  // A waiting caller's look at the sockets: poll() without waiting, then read and write what is
  // ready, as the progress thread does; whether any socket was ready.
  bool PollFromCaller();
  // Whether the progress thread leaves the sockets to a spinning caller now.
  bool StandsBack() const;
  // Ranks of this job on this host (this one, and every peer whose connection has the same
  // address at both ends) against the cpus this process may run on.
  bool Oversubscribed() const;

  // Everything below runs with mutex_ held.
  // Appends a pollfd (and its peer) for every connected peer not lost: POLLIN, and POLLOUT
  // while sends wait.
  void AddPeerFdsLocked(std::vector<pollfd>& fds, std::vector<int>& owners) const;
  // Reads and writes for every fds[i], i >= first, that poll() reported ready.
  void ServeReadyLocked(const std::vector<pollfd>& fds, const std::vector<int>& owners,
                        size_t first);
  void WriteLocked(int peer, size_t budget);  // writes until EAGAIN or `budget` bytes
  void ReadLocked(int peer);
  void StartMessageLocked(int peer);
  void FinishMessageLocked(int peer);
  void DeliverToSelfLocked(uint64_t tag, const uint8_t* data, size_t bytes);
  void LosePeerLocked(int peer, const std::string& why);
  void FailAllLocked(chorus_status status, const std::string& message);
  void WakeProgressThread();
  std::string SizeMismatch(int peer, uint64_t tag, size_t posted, size_t sent) const;

  const int rank_;
  const int size_;
  std::mutex mutex_;
  std::vector<Peer> peers_;  // indexed by rank; peers_[rank_] carries messages to itself
  bool failed_ = false;      // after Abort or destruction: every operation fails
  chorus_status failure_status_ = CHORUS_OK;
  std::string failure_message_;
  std::vector<uint8_t> discard_;    // payload of a message whose receive was rejected
  int wake_fd_ = -1;                // eventfd: interrupts the progress thread's poll()
  std::vector<pollfd> caller_fds_;  // PollFromCaller's, under mutex_
  std::vector<int> caller_owners_;
  // Handed to every request; null when waits should not spin (Oversubscribed()).
  std::shared_ptr<CallerProgress> caller_progress_;
  std::thread progress_;
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_TCP_ENDPOINT_H_
