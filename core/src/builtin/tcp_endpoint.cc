#include "builtin/tcp_endpoint.h"

#include <chorus/base/error.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chorus/host_cpus.hpp>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <system_error>
#include <thread>

#include "base/abort_scope.h"
#include "base/job_secret.h"
#include "base/logging.h"
#include "base/socket_util.h"

namespace chorus::internal {

struct TcpEndpoint::PendingSend {
  std::shared_ptr<CoreRequest> request;
  uint8_t header[16];
  const uint8_t* data;
  size_t bytes;
  size_t written;  // of header and payload together
};

struct TcpEndpoint::PendingRecv {
  std::shared_ptr<CoreRequest> request;
  uint8_t* data;
  size_t bytes;
};

// A message that arrived before its receive was posted.
struct TcpEndpoint::BufferedMessage {
  std::vector<uint8_t> payload;
  bool complete = false;  // false while its payload is still arriving
};

struct TcpEndpoint::Peer {
  int fd = -1;
  bool lost = false;
  std::string lost_message;
  std::deque<PendingSend> sends;  // in order; the front one is being written

  // The message being read: its header, then its payload into `target`.
  uint8_t header[16] = {};
  size_t header_read = 0;
  bool in_payload = false;
  uint64_t tag = 0;
  size_t bytes = 0;
  size_t payload_read = 0;
  uint8_t* target = nullptr;                       // nullptr: read into discard_
  std::shared_ptr<CoreRequest> target_request;     // the posted receive it fills, or
  std::shared_ptr<BufferedMessage> target_buffer;  // the buffer it fills

  // Per tag, receives waiting for a message, or messages waiting for a receive (never both).
  std::unordered_map<uint64_t, std::deque<PendingRecv>> posted;
  std::unordered_map<uint64_t, std::deque<std::shared_ptr<BufferedMessage>>> buffered;

  void ResetIncoming() {
    header_read = 0;
    in_payload = false;
    tag = 0;
    bytes = 0;
    payload_read = 0;
    target = nullptr;
    target_request.reset();
    target_buffer.reset();
  }
};

namespace {

using sdk::Fail;

constexpr uint32_t kHelloMagic = 0x63745443;  // "CTtc"
// 2: the greeting carries a challenge, and every connection proves the job's secret.
constexpr uint32_t kWireVersion = 2;
constexpr size_t kHeaderBytes = 16;
constexpr size_t kDiscardBytes = 64 * 1024;
// Bytes the progress thread moves for one peer per wake-up before the others get their turn.
constexpr size_t kIoBudget = 16 * 1024 * 1024;
// What a caller's isend writes itself before leaving the rest to the progress thread: one write
// (up to what the socket takes now), so that isend returns at once even while a fast reader
// keeps draining the socket.
constexpr size_t kCallerWriteBudget = 1;
// How often the progress thread looks at the host's abort flag while idle.
constexpr int kPollMs = 50;
// How long a wait polls the sockets itself after its last poll that moved data before it sleeps
// (as the ucx and shm plugins spin), and the largest message whose wait does: with waits spinning
// on large messages, 2 processes on 2 cores streamed 1 MiB messages at a third of the bandwidth;
// with the progress thread standing back, a cap of 4 MiB still cut streaming bandwidth at 256 KiB
// to 2 MiB (while it halved ping-pong latency there).
constexpr std::chrono::microseconds kCallerSpin{50};
constexpr size_t kCallerSpinMaxBytes = 64 * 1024;

void PutU64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint64_t GetU64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

// What each side of a new connection says first: the connector its hello as soon as it
// connects, the acceptor its own (its greeting) as soon as it accepts. Then the connector sends
// its proof (kProofBytes, zeros without a secret) over both challenges, and the acceptor, once it
// checked it, its own; so both know the other holds the job's secret (base/job_secret.h),
// and the challenges make every proof good for one connection only.
struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kWireVersion;
  int32_t rank = 0;
  int32_t size = 0;
  uint32_t flags = 0;  // kHelloSecret when the sender has a job secret
  std::string challenge = std::string(JobSecret::kChallengeBytes, '\0');
};
constexpr uint32_t kHelloSecret = 1;
constexpr size_t kHelloBytes = 20 + JobSecret::kChallengeBytes;
constexpr size_t kProofBytes = JobSecret::kProofBytes;
constexpr std::string_view kConnectorRole = "chorus tcp transport connector";
constexpr std::string_view kAcceptorRole = "chorus tcp transport acceptor";
// Connections waiting for their hello at once; a new one closes the oldest.
constexpr size_t kMaxPendingConnections = 64;

void EncodeHello(const Hello& hello, uint8_t out[kHelloBytes]) {
  PutU64(out, static_cast<uint64_t>(hello.magic) | static_cast<uint64_t>(hello.version) << 32);
  PutU64(out + 8, static_cast<uint64_t>(static_cast<uint32_t>(hello.rank)) |
                      static_cast<uint64_t>(static_cast<uint32_t>(hello.size)) << 32);
  for (int i = 0; i < 4; ++i) out[16 + i] = static_cast<uint8_t>(hello.flags >> (8 * i));
  std::memcpy(out + 20, hello.challenge.data(), JobSecret::kChallengeBytes);
}

Hello DecodeHello(const uint8_t in[kHelloBytes]) {
  const uint64_t a = GetU64(in), b = GetU64(in + 8);
  Hello hello;
  hello.magic = static_cast<uint32_t>(a);
  hello.version = static_cast<uint32_t>(a >> 32);
  hello.rank = static_cast<int32_t>(static_cast<uint32_t>(b));
  hello.size = static_cast<int32_t>(static_cast<uint32_t>(b >> 32));
  hello.flags = 0;
  for (int i = 0; i < 4; ++i) hello.flags |= static_cast<uint32_t>(in[16 + i]) << (8 * i);
  hello.challenge.assign(reinterpret_cast<const char*>(in + 20), JobSecret::kChallengeBytes);
  return hello;
}

// What a proof binds besides the two challenges: who connects to whom in a job of which size.
std::string Link(int connector, int acceptor, int size) {
  return std::to_string(connector) + ">" + std::to_string(acceptor) + "/" + std::to_string(size);
}

std::string Proof(const JobSecret& secret, std::string_view role, const std::string& first,
                  const std::string& second, const std::string& link) {
  if (!secret.present()) return std::string(kProofBytes, '\0');
  const Digest256 proof = secret.Prove(role, {first, second, link});
  return std::string(proof.begin(), proof.end());
}

bool ProofHolds(const JobSecret& secret, const uint8_t* proof, std::string_view role,
                const std::string& first, const std::string& second, const std::string& link) {
  return !secret.present() || secret.Verify(proof, role, {first, second, link});
}

Clock::time_point DeadlineFromMs(int64_t timeout_ms) {
  if (timeout_ms < 0) return Clock::time_point::max();
  return DeadlineAfter(std::chrono::milliseconds(timeout_ms));
}

std::string AddressKey(const std::string& prefix, int rank) {
  return prefix + "tcp/addr/" + std::to_string(rank);
}

// The address rank `peer` published, waiting for it until `deadline`.
std::string ReadAddress(const chorus_kv_store& store, const std::string& prefix, int rank, int peer,
                        Clock::time_point deadline, int64_t timeout_ms) {
  const std::string key = AddressKey(prefix, peer);
  std::vector<char> value(256);
  size_t size = 0;
  const int poll_ms = PollTimeoutMs(deadline);
  chorus_status status = store.get(store.ctx, key.c_str(), poll_ms < 0 ? -1 : poll_ms, value.data(),
                                   value.size(), &size);
  if (status == CHORUS_OK && size > value.size()) {
    value.resize(size);
    status = store.get(store.ctx, key.c_str(), 0, value.data(), value.size(), &size);
  }
  if (status == CHORUS_TIMEOUT) {
    Fail(CHORUS_TIMEOUT, "tcp: rank ", rank, " waited ", timeout_ms, " ms for rank ", peer,
         " to publish its address ('", key, "' in the rendezvous store); is rank ", peer,
         " started, with the same job?");
  }
  if (status != CHORUS_OK) {
    Fail(status, "tcp: rank ", rank, " could not read '", key, "' from the rendezvous store (",
         StatusName(status), ")");
  }
  return std::string(value.data(), std::min(size, value.size()));
}

void Publish(const chorus_kv_store& store, const std::string& prefix, int rank,
             const std::string& address) {
  const std::string key = AddressKey(prefix, rank);
  const chorus_status status = store.set(store.ctx, key.c_str(), address.data(), address.size());
  if (status != CHORUS_OK) {
    Fail(status, "tcp: rank ", rank, " could not publish its address in the rendezvous store (",
         StatusName(status), ")");
  }
}

void CheckAbortFlag(int rank) {
  if (AbortRequested()) {
    Fail(CHORUS_ABORTED, "tcp: rank ", rank,
         " stopped connecting: the core asked this work to stop (a lost peer, a time-out, or the "
         "process is shutting down)");
  }
}

// A connection to `host:port`, retried (a refused connect, say) until `deadline`.
UniqueFd ConnectWithRetry(int rank, int peer, const std::string& host, uint16_t port,
                          Clock::time_point deadline, int64_t timeout_ms) {
  std::string error;
  for (;;) {
    CheckAbortFlag(rank);
    UniqueFd fd = ConnectTcp(host, port, deadline, &error);
    if (fd.valid()) return fd;
    if (Clock::now() >= deadline) {
      Fail(CHORUS_TIMEOUT, "tcp: rank ", rank, " could not connect to rank ", peer, " at ",
           JoinHostPort(host, port), " within ", timeout_ms, " ms: ", error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Sends all of `data` by `deadline`, or fails naming what it was for.
void SendOrFail(int fd, const void* data, size_t size, Clock::time_point deadline, int rank,
                int peer, const char* what) {
  int err = 0;
  const IoResult result = SendAll(fd, data, size, deadline, &err);
  if (result == IoResult::kOk) return;
  Fail(result == IoResult::kTimedOut ? CHORUS_TIMEOUT : CHORUS_PEER_LOST, "tcp: rank ", rank,
       " could not send ", what, " to rank ", peer, ": ",
       result == IoResult::kTimedOut ? "timed out" : ErrnoText(err));
}

// Receives all of `size` bytes by `deadline`, or fails naming what it was waiting for.
void RecvOrFail(int fd, void* data, size_t size, Clock::time_point deadline, int rank, int peer,
                const char* what) {
  int err = 0;
  const IoResult result = RecvAll(fd, data, size, deadline, &err);
  if (result == IoResult::kOk) return;
  Fail(result == IoResult::kTimedOut ? CHORUS_TIMEOUT : CHORUS_PEER_LOST, "tcp: rank ", rank,
       " connected to rank ", peer, ", which did not send ", what, ": ",
       result == IoResult::kTimedOut ? "it sent nothing in time"
       : result == IoResult::kClosed ? "it closed the connection"
                                     : ErrnoText(err));
}

// Why a hello cannot be one of this job's ranks; empty when it can.
std::string WhatIsWrong(const Hello& hello, int size) {
  if (hello.magic != kHelloMagic) return "it is not a chorus tcp transport (wrong greeting)";
  if (hello.version != kWireVersion) {
    return "it speaks wire version " + std::to_string(hello.version) + ", this rank " +
           std::to_string(kWireVersion) + " (mixed chorus versions)";
  }
  if (hello.size != size) {
    return "it was started with a job of size " + std::to_string(hello.size) + ", this rank with " +
           std::to_string(size) + " (every rank must be given the same size)";
  }
  if (hello.rank < 0 || hello.rank >= size) {
    return "it claims rank " + std::to_string(hello.rank) + ", outside the job";
  }
  return "";
}

// A connecting member's hello must be of this job and of a lower rank than `rank`'s.
void CheckConnector(const Hello& hello, int rank, int size) {
  if (const std::string wrong = WhatIsWrong(hello, size); !wrong.empty()) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", rank, " was contacted by rank ", hello.rank,
         ", but ", wrong);
  }
  if (hello.rank >= rank) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", rank, " was contacted by a rank ", hello.rank,
         ", which it connects to itself (are two processes given the same rank?)");
  }
}

// The two ends must agree on whether the job has a secret; a difference is a mistake in the
// job's set-up, named on both sides.
void CheckSameSecretMode(const Hello& hello, const JobSecret& secret, int rank) {
  const bool theirs = (hello.flags & kHelloSecret) != 0;
  if (theirs == secret.present()) return;
  Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", hello.rank, (theirs ? " has" : " has no"),
       " job secret but rank ", rank, (theirs ? " has none" : " has one"), "; ", kJobSecretHint);
}

}  // namespace

TcpEndpoint::TcpEndpoint(int rank, int size)
    : rank_(rank), size_(size), peers_(static_cast<size_t>(size)), discard_(kDiscardBytes) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) Fail(CHORUS_INTERNAL, "tcp: eventfd: ", ErrnoText(errno));
}

std::unique_ptr<TcpEndpoint> TcpEndpoint::Create(int rank, int size, const chorus_kv_store& store,
                                                 int64_t timeout_ms,
                                                 const TcpEndpointOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", rank, " of size ", size,
         " is not a valid rank (0 <= rank < size)");
  }
  std::unique_ptr<TcpEndpoint> self(new TcpEndpoint(rank, size));
  self->Connect(store, timeout_ms, options);
  if (size > 1 && !self->Oversubscribed()) {
    self->caller_progress_ = std::make_shared<CallerProgress>(
        [endpoint = self.get()] { return endpoint->PollFromCaller(); }, kCallerSpin,
        [endpoint = self.get()] { endpoint->WakeProgressThread(); });
  }
  self->progress_ = std::thread([endpoint = self.get()] { endpoint->ProgressLoop(); });
  return self;
}

void TcpEndpoint::Connect(const chorus_kv_store& store, int64_t timeout_ms,
                          const TcpEndpointOptions& options) {
  if (size_ == 1) return;
  const Clock::time_point deadline = DeadlineFromMs(timeout_ms);
  UniqueFd listener;
  try {
    listener = ListenTcp(options.host, 0);
  } catch (const Error& e) {
    Fail(e.status() == CHORUS_INVALID_ARGUMENT ? CHORUS_INVALID_ARGUMENT : CHORUS_UNAVAILABLE,
         "tcp: rank ", rank_, " cannot listen on host '", options.host,
         "' (option host): ", e.what());
  }
  Publish(store, options.store_prefix, rank_,
          JoinHostPort(options.host, LocalPort(listener.get())));

  JobSecret secret;
  try {
    secret = JobSecret::FromEnvironment();
  } catch (const Error& e) {
    Fail(e.status(), "tcp: rank ", rank_, ": ", e.what());
  }
  if (!secret.present()) JobSecret::WarnOpenOnce("each tcp transport listener");

  // The lower rank of each pair connects and says hello; a connect completes in the kernel's
  // backlog without the peer's accept, so this never waits for a peer. Then each rank exchanges
  // proofs with its higher ranks, which needs them to admit (the highest rank starts there), and
  // last admits its lower ranks: nothing waits in a circle.
  std::vector<std::string> challenges(static_cast<size_t>(size_));
  for (int peer = rank_ + 1; peer < size_; ++peer) {
    const std::string address =
        ReadAddress(store, options.store_prefix, rank_, peer, deadline, timeout_ms);
    HostPort split;
    if (const std::string problem = ParseHostPort(address, &split); !problem.empty()) {
      Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", peer, " published the address '", address,
           "', which ", problem, " (its option host must be a host name or an IP address)");
    }
    UniqueFd fd = ConnectWithRetry(rank_, peer, split.host, split.port, deadline, timeout_ms);
    Hello mine;
    mine.rank = rank_;
    mine.size = size_;
    mine.flags = secret.present() ? kHelloSecret : 0;
    if (secret.present()) mine.challenge = JobSecret::Challenge();
    challenges[static_cast<size_t>(peer)] = mine.challenge;
    uint8_t bytes[kHelloBytes];
    EncodeHello(mine, bytes);
    SendOrFail(fd.get(), bytes, sizeof bytes, deadline, rank_, peer, "its hello");
    peers_[static_cast<size_t>(peer)].fd = fd.release();
  }
  for (int peer = rank_ + 1; peer < size_; ++peer) {
    ProveToHigherRank(peer, secret, challenges[static_cast<size_t>(peer)], deadline);
  }
  AdmitLowerRanks(listener.get(), secret, deadline, timeout_ms);
}

// The connector's side, after its hello: reads the acceptor's greeting, sends this rank's proof
// and checks the acceptor's.
void TcpEndpoint::ProveToHigherRank(int peer, const JobSecret& secret,
                                    const std::string& my_challenge, Clock::time_point deadline) {
  const int fd = peers_[static_cast<size_t>(peer)].fd;
  uint8_t bytes[kHelloBytes];
  RecvOrFail(fd, bytes, sizeof bytes, deadline, rank_, peer, "its greeting");
  const Hello theirs = DecodeHello(bytes);
  if (const std::string wrong = WhatIsWrong(theirs, size_); !wrong.empty()) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", rank_, " connected to the address rank ", peer,
         " published, but ", wrong);
  }
  if (theirs.rank != peer) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", rank_, " connected to the address rank ", peer,
         " published, but rank ", theirs.rank, " answered (a stale address in the store?)");
  }
  CheckSameSecretMode(theirs, secret, rank_);
  const std::string link = Link(rank_, peer, size_);
  const std::string proof = Proof(secret, kConnectorRole, theirs.challenge, my_challenge, link);
  SendOrFail(fd, proof.data(), proof.size(), deadline, rank_, peer, "its proof");
  uint8_t their_proof[kProofBytes];
  RecvOrFail(fd, their_proof, sizeof their_proof, deadline, rank_, peer, "its proof");
  if (!ProofHolds(secret, their_proof, kAcceptorRole, my_challenge, theirs.challenge, link)) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", rank_, " connected to the address rank ", peer,
         " published, but what answered does not hold the job's secret (another job on that "
         "port?); ",
         kJobSecretHint);
  }
}

// The acceptor's side: greets every connection at once, and admits the ones that answer as a
// lower rank of this job with a proof of its secret. Connections are served side by side, so a
// silent or slow one (another program, a port scanner) delays no rank.
void TcpEndpoint::AdmitLowerRanks(int listener, const JobSecret& secret, Clock::time_point deadline,
                                  int64_t timeout_ms) {
  struct Pending {
    UniqueFd fd;
    std::string peer;  // address:port, for messages
    std::string challenge;
    uint8_t answer[kHelloBytes + kProofBytes];
    size_t received = 0;
  };
  std::vector<Pending> pending;
  int waiting = rank_;  // lower ranks not yet admitted
  while (waiting > 0) {
    CheckAbortFlag(rank_);
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    for (const Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    const int ms = PollTimeoutMs(deadline);
    const int n = ::poll(fds.data(), fds.size(), ms < 0 || ms > kPollMs ? kPollMs : ms);
    if (n < 0 && errno != EINTR) Fail(CHORUS_INTERNAL, "tcp: poll: ", ErrnoText(errno));
    if (n <= 0) {
      if (Clock::now() < deadline) continue;
      std::string missing;
      for (int peer = 0; peer < rank_; ++peer) {
        if (peers_[static_cast<size_t>(peer)].fd < 0) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
        }
      }
      Fail(CHORUS_TIMEOUT, "tcp: rank ", rank_, " waited ", timeout_ms, " ms for rank(s) ", missing,
           " to connect; are they started, with the same job?");
    }
    // Read what the pending connections sent; admit or drop the complete ones.
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Pending& p = pending[i - 1];
      const ssize_t got =
          ::recv(p.fd.get(), p.answer + p.received, sizeof p.answer - p.received, 0);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (got <= 0) {
        Log().warn("tcp: rank {} dropped a connection from {}: it closed before its hello", rank_,
                   p.peer);
        p.fd.reset();
        continue;
      }
      p.received += static_cast<size_t>(got);
      if (p.received < kHelloBytes) continue;
      const Hello hello = DecodeHello(p.answer);
      if (hello.magic != kHelloMagic || hello.version != kWireVersion) {
        Log().warn("tcp: rank {} dropped a connection from {}: {}", rank_, p.peer,
                   WhatIsWrong(hello, size_));
        p.fd.reset();
        continue;
      }
      CheckSameSecretMode(hello, secret, rank_);
      // Without a secret a hello is taken at its word, so a member given another size or rank
      // is told at once; with one, only once it proved it is a member (below).
      if (!secret.present()) CheckConnector(hello, rank_, size_);
      if (p.received < sizeof p.answer) continue;
      // The proof binds the size the connector was given, so a member given another size is
      // told so rather than taken for an outsider.
      const std::string link = Link(hello.rank, rank_, hello.size);
      if (!ProofHolds(secret, p.answer + kHelloBytes, kConnectorRole, p.challenge, hello.challenge,
                      link)) {
        Log().warn(
            "tcp: rank {} dropped a connection from {} that claimed rank {}: it does not hold "
            "the job's secret",
            rank_, p.peer, hello.rank);
        p.fd.reset();
        continue;
      }
      CheckConnector(hello, rank_, size_);
      if (peers_[static_cast<size_t>(hello.rank)].fd >= 0) {
        Fail(CHORUS_INVALID_ARGUMENT, "tcp: rank ", rank_, " was contacted by a second rank ",
             hello.rank, " (are two processes given the same rank?)");
      }
      const std::string proof = Proof(secret, kAcceptorRole, hello.challenge, p.challenge, link);
      SendOrFail(p.fd.get(), proof.data(), proof.size(), deadline, rank_, hello.rank, "its proof");
      SetNoDelay(p.fd.get());
      peers_[static_cast<size_t>(hello.rank)].fd = p.fd.release();
      --waiting;
    }
    std::erase_if(pending, [](const Pending& p) { return !p.fd.valid(); });
    if (fds[0].revents == 0) continue;
    UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) continue;  // the connection went away again, or EINTR/EAGAIN
    if (pending.size() >= kMaxPendingConnections) {
      Log().warn("tcp: rank {} dropped a connection from {}: {} others wait for their hello", rank_,
                 pending.front().peer, pending.size());
      pending.erase(pending.begin());
    }
    Hello greeting;
    greeting.rank = rank_;
    greeting.size = size_;
    greeting.flags = secret.present() ? kHelloSecret : 0;
    if (secret.present()) greeting.challenge = JobSecret::Challenge();
    uint8_t bytes[kHelloBytes];
    EncodeHello(greeting, bytes);
    int err = 0;
    // A fresh socket's buffer takes a greeting at once; a peer that is gone is just dropped.
    if (SendAll(fd.get(), bytes, sizeof bytes, DeadlineAfter(std::chrono::milliseconds(1000)),
                &err) != IoResult::kOk) {
      continue;
    }
    Pending p;
    p.peer = PeerEndpoint(fd.get());
    p.fd = std::move(fd);
    p.challenge = greeting.challenge;
    pending.push_back(std::move(p));
  }
}

TcpEndpoint::~TcpEndpoint() {
  // First, so that no request's wait reaches into this endpoint any more.
  if (caller_progress_ != nullptr) caller_progress_->Detach();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    FailAllLocked(CHORUS_ABORTED, "tcp: the endpoint of rank " + std::to_string(rank_) +
                                      " was destroyed while the operation was pending");
  }
  if (progress_.joinable()) progress_.join();
  for (Peer& peer : peers_) {
    if (peer.fd >= 0) ::close(peer.fd);
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::shared_ptr<CoreRequest> TcpEndpoint::Send(int peer, uint64_t tag, const void* data,
                                               size_t bytes) {
  if (peer < 0 || peer >= size_) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp isend: peer ", peer, " is not a rank of ", size_);
  }
  if (data == nullptr && bytes > 0) Fail(CHORUS_INVALID_ARGUMENT, "tcp isend: data is NULL");
  auto request = std::make_shared<CoreRequest>(caller_progress_, bytes <= kCallerSpinMaxBytes);
  const auto* payload = static_cast<const uint8_t*>(data);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) Fail(failure_status_, failure_message_);
    if (peer == rank_) {
      DeliverToSelfLocked(tag, payload, bytes);
      request->Complete(CHORUS_OK);
      return request;
    }
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (p.lost) Fail(CHORUS_PEER_LOST, p.lost_message);
    PendingSend send{request, {}, payload, bytes, 0};
    PutU64(send.header, tag);
    PutU64(send.header + 8, bytes);
    p.sends.push_back(send);
    if (p.sends.size() == 1) {
      WriteLocked(peer, kCallerWriteBudget);  // small messages need no thread hop
      wake = !p.sends.empty();
    }
  }
  if (wake) WakeProgressThread();  // to watch the socket for room to write the rest
  return request;
}

std::shared_ptr<CoreRequest> TcpEndpoint::Recv(int peer, uint64_t tag, void* data, size_t bytes) {
  if (peer < 0 || peer >= size_) {
    Fail(CHORUS_INVALID_ARGUMENT, "tcp irecv: peer ", peer, " is not a rank of ", size_);
  }
  if (data == nullptr && bytes > 0) Fail(CHORUS_INVALID_ARGUMENT, "tcp irecv: data is NULL");
  auto request = std::make_shared<CoreRequest>(caller_progress_, bytes <= kCallerSpinMaxBytes);
  auto* out = static_cast<uint8_t*>(data);
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) Fail(failure_status_, failure_message_);
  Peer& p = peers_[static_cast<size_t>(peer)];
  auto buffered = p.buffered.find(tag);
  if (buffered != p.buffered.end()) {
    std::shared_ptr<BufferedMessage> message = buffered->second.front();
    buffered->second.pop_front();
    if (buffered->second.empty()) p.buffered.erase(buffered);
    if (message->payload.size() != bytes) {
      // A message still arriving is read on and dropped.
      request->Complete(CHORUS_INVALID_ARGUMENT,
                        SizeMismatch(peer, tag, bytes, message->payload.size()));
    } else if (message->complete) {
      if (bytes > 0) std::memcpy(out, message->payload.data(), bytes);
      request->Complete(CHORUS_OK);
    } else {
      // The message is arriving now (only the one being read can be incomplete): take what
      // came so far and let the rest land in the caller's buffer.
      if (p.target_buffer != message) {
        Fail(CHORUS_INTERNAL, "tcp irecv: an incomplete message that is not being read (a bug)");
      }
      if (p.payload_read > 0) std::memcpy(out, message->payload.data(), p.payload_read);
      p.target = out;
      p.target_request = request;
      p.target_buffer.reset();
    }
    return request;
  }
  if (p.lost) Fail(CHORUS_PEER_LOST, p.lost_message);
  p.posted[tag].push_back(PendingRecv{request, out, bytes});
  return request;
}

void TcpEndpoint::Abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  FailAllLocked(CHORUS_ABORTED,
                "tcp: the endpoint of rank " + std::to_string(rank_) + " was aborted");
}

void TcpEndpoint::ProgressLoop() {
  try {
    while (ProgressOnce()) {
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    FailAllLocked(CHORUS_INTERNAL, "tcp: the progress thread of rank " + std::to_string(rank_) +
                                       " failed: " + e.what());
  }
}

bool TcpEndpoint::ProgressOnce() {
  std::vector<pollfd> fds;
  std::vector<int> owners;  // the peer of each fds[i]; -1 for the wake-up fd
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return false;
    if (AbortRequested()) {
      FailAllLocked(CHORUS_ABORTED,
                    "tcp: the process is shutting down (the host's abort flag is raised)");
      return false;
    }
    fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    owners.push_back(-1);
    AddPeerFdsLocked(fds, owners);
  }
  const bool stands_back = StandsBack();
  // Standing back, it sleeps on the wake-up fd alone, for up to the hand-over: a caller that
  // stops spinning without its message wakes it.
  const int ready =
      ::poll(fds.data(), stands_back ? 1 : fds.size(),
             stands_back ? static_cast<int>(CallerProgress::kHandOver.count()) : kPollMs);
  if (ready < 0) {
    if (errno == EINTR) return true;
    throw std::system_error(errno, std::generic_category(), "poll");
  }
  if (fds[0].revents != 0) {
    uint64_t count = 0;
    (void)!::read(wake_fd_, &count, sizeof count);
  }
  // A caller that began to spin while this thread slept in poll() serves the sockets itself.
  if (stands_back || StandsBack()) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return false;
  ServeReadyLocked(fds, owners, 1);
  return !failed_;
}

bool TcpEndpoint::PollFromCaller() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return false;
  caller_fds_.clear();
  caller_owners_.clear();
  AddPeerFdsLocked(caller_fds_, caller_owners_);
  if (::poll(caller_fds_.data(), caller_fds_.size(), 0) <= 0) return false;
  ServeReadyLocked(caller_fds_, caller_owners_, 0);
  return true;
}

bool TcpEndpoint::StandsBack() const {
  return caller_progress_ != nullptr && caller_progress_->ProgressThreadStandsBack();
}

void TcpEndpoint::AddPeerFdsLocked(std::vector<pollfd>& fds, std::vector<int>& owners) const {
  for (int peer = 0; peer < size_; ++peer) {
    const Peer& p = peers_[static_cast<size_t>(peer)];
    if (peer == rank_ || p.fd < 0 || p.lost) continue;
    const short events = static_cast<short>(POLLIN | (p.sends.empty() ? 0 : POLLOUT));
    fds.push_back(pollfd{p.fd, events, 0});
    owners.push_back(peer);
  }
}

void TcpEndpoint::ServeReadyLocked(const std::vector<pollfd>& fds, const std::vector<int>& owners,
                                   size_t first) {
  for (size_t i = first; i < fds.size(); ++i) {
    const short revents = fds[i].revents;
    const int peer = owners[i];
    if (revents == 0 || peers_[static_cast<size_t>(peer)].lost) continue;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) ReadLocked(peer);
    if (failed_) return;
    if (!peers_[static_cast<size_t>(peer)].lost) WriteLocked(peer, kIoBudget);
  }
}

bool TcpEndpoint::Oversubscribed() const {
  int here = 1;
  for (int peer = 0; peer < size_; ++peer) {
    const Peer& p = peers_[static_cast<size_t>(peer)];
    if (peer == rank_ || p.fd < 0) continue;
    HostPort local, remote;
    if (ParseHostPort(LocalEndpoint(p.fd), &local).empty() &&
        ParseHostPort(PeerEndpoint(p.fd), &remote).empty() && local.host == remote.host) {
      ++here;
    }
  }
  return sdk::MoreRanksThanCpus(here);
}

void TcpEndpoint::WriteLocked(int peer, size_t budget) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  while (!p.sends.empty() && !p.lost && budget > 0) {
    PendingSend& s = p.sends.front();
    iovec iov[2];
    size_t count = 0;
    if (s.written < kHeaderBytes) {
      iov[count++] = iovec{s.header + s.written, kHeaderBytes - s.written};
    }
    const size_t payload_done = s.written > kHeaderBytes ? s.written - kHeaderBytes : 0;
    if (s.bytes > payload_done) {
      iov[count++] = iovec{const_cast<uint8_t*>(s.data) + payload_done, s.bytes - payload_done};
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    const ssize_t n = ::sendmsg(p.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      s.written += static_cast<size_t>(n);
      budget -= std::min(budget, static_cast<size_t>(n));
      if (s.written == kHeaderBytes + s.bytes) {
        s.request->Complete(CHORUS_OK);
        p.sends.pop_front();
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) return;
    LosePeerLocked(peer, "send: " + ErrnoText(errno));
    return;
  }
}

void TcpEndpoint::ReadLocked(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  size_t budget = kIoBudget;
  while (!p.lost && !failed_ && budget > 0) {
    ssize_t n;
    if (!p.in_payload) {
      n = ::recv(p.fd, p.header + p.header_read, kHeaderBytes - p.header_read, MSG_DONTWAIT);
      if (n > 0) {
        p.header_read += static_cast<size_t>(n);
        if (p.header_read == kHeaderBytes) StartMessageLocked(peer);
        continue;
      }
    } else {
      size_t want = p.bytes - p.payload_read;
      uint8_t* into = p.target != nullptr ? p.target + p.payload_read : discard_.data();
      if (p.target == nullptr) want = std::min(want, discard_.size());
      n = ::recv(p.fd, into, want, MSG_DONTWAIT);
      if (n > 0) {
        p.payload_read += static_cast<size_t>(n);
        budget -= std::min(budget, static_cast<size_t>(n));
        if (p.payload_read == p.bytes) FinishMessageLocked(peer);
        continue;
      }
    }
    if (n == 0) {
      LosePeerLocked(peer, "");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    LosePeerLocked(peer, "recv: " + ErrnoText(errno));
    return;
  }
}

void TcpEndpoint::StartMessageLocked(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  p.tag = GetU64(p.header);
  const uint64_t bytes = GetU64(p.header + 8);
  p.header_read = 0;
  p.payload_read = 0;
  p.bytes = static_cast<size_t>(bytes);
  auto posted = p.posted.find(p.tag);
  if (posted != p.posted.end()) {
    PendingRecv recv = posted->second.front();
    posted->second.pop_front();
    if (posted->second.empty()) p.posted.erase(posted);
    if (recv.bytes != p.bytes) {
      recv.request->Complete(CHORUS_INVALID_ARGUMENT,
                             SizeMismatch(peer, p.tag, recv.bytes, p.bytes));
      p.target = nullptr;  // read the payload into discard_ to stay in step with the stream
    } else {
      p.target = recv.data;
      p.target_request = recv.request;
    }
  } else {
    auto message = std::make_shared<BufferedMessage>();
    try {
      message->payload.resize(p.bytes);
    } catch (const std::exception&) {
      LosePeerLocked(peer, "it sent a message of " + std::to_string(bytes) +
                               " bytes that does not fit in memory (a corrupted stream?)");
      return;
    }
    p.target = message->payload.data();
    p.target_buffer = message;
    p.buffered[p.tag].push_back(std::move(message));
  }
  p.in_payload = true;
  if (p.bytes == 0) FinishMessageLocked(peer);
}

void TcpEndpoint::FinishMessageLocked(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.target_request) p.target_request->Complete(CHORUS_OK);
  if (p.target_buffer) p.target_buffer->complete = true;
  p.ResetIncoming();
}

void TcpEndpoint::DeliverToSelfLocked(uint64_t tag, const uint8_t* data, size_t bytes) {
  Peer& p = peers_[static_cast<size_t>(rank_)];
  auto posted = p.posted.find(tag);
  if (posted != p.posted.end()) {
    PendingRecv recv = posted->second.front();
    posted->second.pop_front();
    if (posted->second.empty()) p.posted.erase(posted);
    if (recv.bytes != bytes) {
      recv.request->Complete(CHORUS_INVALID_ARGUMENT, SizeMismatch(rank_, tag, recv.bytes, bytes));
      return;
    }
    if (bytes > 0) std::memcpy(recv.data, data, bytes);
    recv.request->Complete(CHORUS_OK);
    return;
  }
  auto message = std::make_shared<BufferedMessage>();
  message->payload.assign(data, data + bytes);
  message->complete = true;
  p.buffered[tag].push_back(std::move(message));
}

void TcpEndpoint::LosePeerLocked(int peer, const std::string& why) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.lost) return;
  p.lost = true;
  p.lost_message = "tcp: rank " + std::to_string(peer) +
                   " closed its connection (the process may have died)" +
                   (why.empty() ? "" : "; " + why);
  Log().debug("{} (seen by rank {})", p.lost_message, rank_);
  if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
  for (PendingSend& send : p.sends) send.request->Complete(CHORUS_PEER_LOST, p.lost_message);
  p.sends.clear();
  for (auto& [tag, queue] : p.posted) {
    for (PendingRecv& recv : queue) recv.request->Complete(CHORUS_PEER_LOST, p.lost_message);
  }
  p.posted.clear();
  if (p.target_request) p.target_request->Complete(CHORUS_PEER_LOST, p.lost_message);
  if (p.target_buffer) {
    // Drop the partial message; complete ones stay deliverable.
    auto queue = p.buffered.find(p.tag);
    if (queue != p.buffered.end() && !queue->second.empty() &&
        queue->second.back() == p.target_buffer) {
      queue->second.pop_back();
      if (queue->second.empty()) p.buffered.erase(queue);
    }
  }
  p.ResetIncoming();
}

void TcpEndpoint::FailAllLocked(chorus_status status, const std::string& message) {
  if (failed_) return;
  failed_ = true;
  failure_status_ = status;
  failure_message_ = message;
  for (Peer& p : peers_) {
    // shutdown, not close: the progress thread may be polling the fd. The peers read end of
    // file and fail their operations with this rank.
    if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
    for (PendingSend& send : p.sends) send.request->Complete(status, message);
    p.sends.clear();
    for (auto& [tag, queue] : p.posted) {
      for (PendingRecv& recv : queue) recv.request->Complete(status, message);
    }
    p.posted.clear();
    if (p.target_request) p.target_request->Complete(status, message);
    p.buffered.clear();
    p.ResetIncoming();
  }
  WakeProgressThread();
}

void TcpEndpoint::WakeProgressThread() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

std::string TcpEndpoint::SizeMismatch(int peer, uint64_t tag, size_t posted, size_t sent) const {
  return "tcp: rank " + std::to_string(rank_) + " posted a receive of " + std::to_string(posted) +
         " bytes from rank " + std::to_string(peer) + " with tag " + std::to_string(tag) +
         ", but the message has " + std::to_string(sent) +
         " bytes (the ranks disagree on a count or dtype)";
}

}  // namespace chorus::internal
