// template_socket.cc: a transport plugin (plugin.h interface 5) over TCP sockets, the smallest
// real one, for vendors to copy: put your network's calls where this one reads and writes its
// sockets, and keep the rest (matching, rendezvous, peer loss, abort).
//  - Each rank listens on a port of the create args' `address` (127.0.0.1 without one) and
//    publishes "host", "port" in the endpoint's store; the lower rank of each pair connects, so
//    there is one connection per pair, and both sides prove the job's secret on it (host's
//    prove_job_secret, ABI 1.2) before it carries a message.
//  - A progress thread per endpoint polls its sockets, so isend and irecv return at once and
//    every request completes on that thread (or on the caller's, when its write went through).
//  - A message under kRendezvousBytes is sent eagerly; one that arrives before its receive is
//    posted waits in a buffer at the receiver (small, and reused). A larger one is announced, and
//    its bytes are sent only once the receiver posted the receive and asked for them, straight
//    into the receiver's buffer. So a receive may be posted in any order (plugin.h rule T2)
//    without an unbounded buffer, and the connection keeps moving other messages meanwhile.
//  - A closed or broken connection fails everything pending to and from that peer with
//    CHORUS_PEER_LOST naming it (T4); abort() fails everything pending with CHORUS_ABORTED (T5);
//    request_wait honours its time-out, and destroy waits for no peer (T6).
// Wire format: every frame starts with a Frame header; eager and data frames carry `bytes` more.
// Both ends run this build of the plugin, so fields travel in the host's byte order.
//
// Rename it: chorus_add_plugin(NAME ...) in CMakeLists.txt, the plugin's name in sdk::PluginTable
// below (it must match the file name libchorus-<name>.so) and the transport's name ("socket").
// Run the kit on it, then the core's ring algorithm over it:
//   chorus-conformance --plugin build/libchorus-template_socket.so --require
//   chorus-conformance --builtin --require --gtest_filter='Algorithm.*:RanksAsProcesses.*'
//       --transport build/libchorus-template_socket.so
#include <chorus/plugin.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

using chorus::sdk::Fail;

namespace {

using Clock = std::chrono::steady_clock;

// Messages of this many bytes and more wait at the sender until their receive is posted.
constexpr size_t kRendezvousBytes = 64 * 1024;
// Payload bytes one peer's socket moves per turn of the progress thread, so a 64 MiB message
// does not hold the lock (and the other peers) until it is through.
constexpr size_t kIoBudget = 4 << 20;
// How often an idle progress thread looks at the host's abort flag (a process that stops).
constexpr int kPollMs = 50;
// Message buffers kept per peer for the next unexpected messages.
constexpr size_t kSpareBuffers = 16;
// How long a new connection may take to say hello before the listener drops it.
constexpr auto kHelloWithin = std::chrono::seconds(10);

enum FrameType : uint32_t {
  kEager = 1,        // tag, bytes, then the message
  kAnnounce = 2,     // tag, bytes, id: a large message waits at the sender
  kClearToSend = 3,  // id: the receive of an announced message is posted; send it
  kRefuse = 4,       // id: the receive posted for it names another byte count
  kData = 5,         // id, bytes, then the announced message
};
struct Frame {
  uint32_t type = 0;
  uint32_t unused = 0;
  uint64_t tag = 0;
  uint64_t bytes = 0;
  uint64_t id = 0;
};
size_t PayloadOf(const Frame& f) { return f.type == kEager || f.type == kData ? f.bytes : 0; }

std::string ErrnoText(int error) { return std::generic_category().message(error); }

int64_t MillisecondsUntil(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max<int64_t>(0, left.count());
}

// A negative time-out means none; so does one too large to add to the clock.
Clock::time_point DeadlineAfter(int64_t timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > (int64_t{1} << 40)) return Clock::time_point::max();
  return Clock::now() + std::chrono::milliseconds(timeout_ms);
}

// A socket, closed with its owner.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Moves all `size` bytes over a non-blocking socket (sends them, or receives them) by
// `deadline`; false with the reason in *why otherwise. For the set-up; messages go through the
// progress thread.
bool MoveAll(int fd, void* data, size_t size, bool send, Clock::time_point deadline,
             std::string* why) {
  char* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = send ? ::send(fd, at, size, MSG_NOSIGNAL) : ::recv(fd, at, size, 0);
    if (n > 0) {
      at += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      *why = "the connection was closed";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *why = ErrnoText(errno);
      return false;
    }
    const int64_t left = MillisecondsUntil(deadline);
    if (left == 0 || chorus::sdk::HostAbortRequested()) {
      *why = left == 0 ? "timed out" : "the core asked this work to stop";
      return false;
    }
    pollfd p{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, kPollMs)));
  }
  return true;
}

// Small messages go out at once rather than waiting to fill a packet.
void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

using AddressList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;
AddressList Resolve(const std::string& host, const char* port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), port, &hints, &found); error != 0) {
    Fail(CHORUS_UNAVAILABLE, "socket: cannot resolve '", host, "': ", ::gai_strerror(error));
  }
  return AddressList(found, ::freeaddrinfo);
}

// A listener on an ephemeral port of `host`; its port number in *port.
Fd Listen(const std::string& host, std::string* port) {
  const AddressList addresses = Resolve(host, "0", AI_PASSIVE);
  const addrinfo& a = *addresses;
  Fd fd(::socket(a.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid() || ::bind(fd.get(), a.ai_addr, a.ai_addrlen) != 0 ||
      ::listen(fd.get(), SOMAXCONN) != 0) {
    Fail(CHORUS_UNAVAILABLE, "socket: cannot listen on '", host, "': ", ErrnoText(errno),
         " (the create args' address must be an address of this host)");
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  char service[NI_MAXSERV] = {};
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&bound), length, nullptr, 0, service,
                    sizeof service, NI_NUMERICSERV) != 0) {
    Fail(CHORUS_INTERNAL, "socket: cannot read the port of the listener on '", host, "'");
  }
  *port = service;
  return fd;
}

// A connection to host:port, made by `deadline`; empty with the reason in *why otherwise.
Fd ConnectTo(const std::string& host, const std::string& port, Clock::time_point deadline,
             std::string* why) {
  const AddressList addresses = Resolve(host, port.c_str(), 0);
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) continue;
    int error = 0;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) error = errno;
    if (error == EINPROGRESS) {  // non-blocking: wait until it is made, or the deadline
      pollfd p{fd.get(), POLLOUT, 0};
      socklen_t length = sizeof error;
      const int64_t left = MillisecondsUntil(deadline);
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT32_MAX))) != 1) {
        error = ETIMEDOUT;
      } else if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
        error = errno;
      }
    }
    if (error == 0) return fd;
    *why = ErrnoText(error);
  }
  return Fd();
}

// ---- Proving the job's secret --------------------------------------------------------------
// What each side of a new connection says first: the connector as soon as it is connected, the
// listener (its greeting) as soon as it accepted. Each then proves the job's secret over the
// other's random challenge, bound to who connects to whom in a job of which size, so a proof is
// good for this one connection only. Without a secret the proofs are zeros and anyone is
// admitted (the core warns once that the job runs open).
constexpr uint32_t kMagic = 0x6b636f73;  // "sock"
constexpr const char* kConnectorRole = "chorus socket template connector";
constexpr const char* kListenerRole = "chorus socket template listener";
constexpr const char* kSecretHint =
    "give every process of the job the same CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE";

struct Hello {
  uint32_t magic = kMagic;
  uint32_t has_secret = 0;
  int32_t rank = 0;
  int32_t size = 0;
  char challenge[32] = {};
};

Hello MakeHello(int rank, int size) {
  Hello hello;
  hello.has_secret = chorus::sdk::JobSecretPresent() ? 1 : 0;
  hello.rank = rank;
  hello.size = size;
  if (::getrandom(hello.challenge, sizeof hello.challenge, 0) !=
      static_cast<ssize_t>(sizeof hello.challenge)) {
    Fail(CHORUS_INTERNAL, "socket: getrandom: ", ErrnoText(errno));
  }
  return hello;
}

std::string Link(int connector, int listener, int size) {
  return std::to_string(connector) + ">" + std::to_string(listener) + "/" + std::to_string(size);
}

// 64 hex digits: this process's proof over the other side's challenge; zeros without a secret.
struct Proof {
  char text[64] = {};
};
Proof ProofOf(const char* role, const Hello& other, const std::string& link) {
  Proof proof;
  std::memset(proof.text, '0', sizeof proof.text);
  if (!chorus::sdk::JobSecretPresent()) return proof;
  const auto hex = chorus::sdk::ProveJobSecret(
      role, std::string(other.challenge, sizeof other.challenge) + link);
  if (!hex || hex->size() != sizeof proof.text) {
    Fail(CHORUS_INTERNAL, "socket: the core could not prove the job's secret");
  }
  std::memcpy(proof.text, hex->data(), sizeof proof.text);
  return proof;
}
// Whether `got` is the proof the other side, in `role`, makes over `mine`: in constant time.
bool ProofHolds(const Proof& got, const char* role, const Hello& mine, const std::string& link) {
  if (!chorus::sdk::JobSecretPresent()) return true;
  const Proof expected = ProofOf(role, mine, link);
  return chorus::sdk::ConstantTimeEquals(std::string_view(got.text, sizeof got.text),
                                         std::string_view(expected.text, sizeof expected.text));
}

}  // namespace

// ---- Requests ----------------------------------------------------------------------------------

// One send or receive. The endpoint keeps the pointer while the operation is pending (under its
// mutex) and forgets it when it completes it; the request itself holds what a waiter needs, so
// it may outlive its endpoint (freed after destroy).
struct chorus_request {
  chorus_request(bool is_send, int with, uint64_t of_tag, void* buffer, size_t byte_count)
      : send(is_send),
        peer(with),
        tag(of_tag),
        data(static_cast<char*>(buffer)),
        bytes(byte_count) {}

  // Once, under `mutex`, by whoever finishes the operation.
  void Complete(chorus_status result, const std::string& why = "") {
    std::lock_guard<std::mutex> lock(mutex);
    if (done) return;
    done = true;
    status = result;
    if (result != CHORUS_OK) message = why;
    finished.notify_all();  // under the lock: the waiter may free this once it is released
  }

  const bool send;
  const int peer;
  const uint64_t tag;
  char* const data;  // the caller's buffer, borrowed until the request completes
  const size_t bytes;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  chorus_status status = CHORUS_OK;
  std::string message;  // of a failure: what last_error() says at every wait or test
};

namespace {

using Request = chorus_request;

// A message (or a large one's announcement) that came before its receive was posted.
struct Unexpected {
  uint64_t tag = 0;
  size_t bytes = 0;
  bool announced = false;     // a large message: its bytes wait at the sender
  uint64_t id = 0;            // announced: the sender's id for it
  std::vector<char> payload;  // not announced: the message
};

// A frame queued for one peer's socket; the front one is being written.
struct Outgoing {
  Frame frame;
  const char* payload = nullptr;  // PayloadOf(frame) bytes, the caller's (borrowed)
  size_t written = 0;             // of the header and the payload together
  Request* request = nullptr;     // completes once it is written (NULL: a control frame)
};

struct Peer {
  Fd fd;
  bool lost = false;
  std::string lost_message;
  std::deque<Outgoing> out;
  uint64_t next_id = 0;
  std::unordered_map<uint64_t, Request*> announced;  // large sends waiting to be asked, by id
  std::unordered_map<uint64_t, Request*> asked;      // receives whose bytes are coming, by id
  // Receives waiting for a message, and messages waiting for a receive, in the order posted or
  // arrived. Never both for one tag: a receive takes the first message of its tag, a message
  // the first receive. (A vendor with thousands in flight keeps them per tag.)
  std::deque<Request*> posted;
  std::deque<Unexpected> unexpected;
  // The frame being read, and where its payload goes: the receive it fills, or `buffer`.
  Frame frame;
  size_t frame_read = 0;
  size_t payload_read = 0;
  char* into = nullptr;
  Request* filling = nullptr;
  std::vector<char> buffer;
  bool drop = false;  // the payload of a receive that failed: read and forgotten
  // Buffers of delivered messages, reused for the next (no allocation per message).
  std::vector<std::vector<char>> spare;

  std::vector<char> TakeBuffer(size_t bytes) {
    std::vector<char> taken;
    if (!spare.empty()) {
      taken = std::move(spare.back());
      spare.pop_back();
    }
    taken.resize(bytes);
    return taken;
  }
  void GiveBack(std::vector<char>&& used) {
    if (used.capacity() > 0 && used.capacity() <= kRendezvousBytes &&
        spare.size() < kSpareBuffers) {
      spare.push_back(std::move(used));
    }
  }
  // The first receive posted for `tag`, taken off the queue; NULL when none is.
  Request* TakePosted(uint64_t tag) {
    const auto it = std::find_if(posted.begin(), posted.end(),
                                 [tag](const Request* r) { return r->tag == tag; });
    if (it == posted.end()) return nullptr;
    Request* request = *it;
    posted.erase(it);
    return request;
  }
};

}  // namespace

// ---- The endpoint ------------------------------------------------------------------------------

struct chorus_transport_endpoint {
  chorus_transport_endpoint(int rank, int size)
      : rank(rank), size(size), peers(static_cast<size_t>(size)) {
    wake_fd = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake_fd.valid()) Fail(CHORUS_INTERNAL, "socket: eventfd: ", ErrnoText(errno));
  }

  ~chorus_transport_endpoint() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      FailAllLocked(CHORUS_ABORTED, "socket: the endpoint of rank " + std::to_string(rank) +
                                        " was destroyed while the operation was pending");
      stopping = true;
    }
    Wake();
    if (progress.joinable()) progress.join();  // within kPollMs: it waits for no peer
  }

  std::string AddressKey(int of) const { return "socket/address/" + std::to_string(of); }

  // The set-up: every pair connected and proven, or a failure naming what did not come.
  void Connect(const chorus::sdk::StoreView& store, const std::string& host, int64_t timeout_ms) {
    if (size == 1) return;
    const Clock::time_point deadline = DeadlineAfter(timeout_ms);
    std::string port;
    const Fd listener = Listen(host, &port);
    std::string address;
    chorus::sdk::PutField(address, host);
    chorus::sdk::PutField(address, port);
    store.Set(AddressKey(rank), address);
    // 1. Connect to every higher rank and say hello. A connect completes in the peer's listen
    //    backlog, so this waits for no peer to do anything.
    std::vector<Hello> hellos(static_cast<size_t>(size));
    for (int peer = rank + 1; peer < size; ++peer) {
      const std::string published =
          store.GetUnlessAborted(AddressKey(peer), MillisecondsUntil(deadline));
      chorus::sdk::FieldReader fields(published);
      const auto peer_host = fields.Next(), peer_port = fields.Next();
      if (!peer_host || !peer_port) {
        Fail(CHORUS_INTERNAL, "socket: rank ", peer, " published a malformed address");
      }
      std::string why;
      Fd fd = ConnectTo(*peer_host, *peer_port, deadline, &why);
      if (!fd.valid()) {
        Fail(CHORUS_UNAVAILABLE, "socket: rank ", rank, " could not connect to rank ", peer, " at ",
             *peer_host, ":", *peer_port, ": ", why);
      }
      hellos[static_cast<size_t>(peer)] = MakeHello(rank, size);
      SendOrFail(fd.get(), &hellos[static_cast<size_t>(peer)], sizeof(Hello), deadline, peer,
                 "its hello");
      peers[static_cast<size_t>(peer)].fd = std::move(fd);
    }
    // 2. Exchange proofs with every higher rank, the highest first: a rank that listens serves
    //    one connection at a time, and a connector that works downwards only ever waits for a
    //    higher rank, so no two ranks wait for each other.
    for (int peer = size - 1; peer > rank; --peer) {
      ProveTo(peer, hellos[static_cast<size_t>(peer)], deadline);
    }
    // 3. Admit every lower rank.
    for (int waiting = rank; waiting > 0;) {
      if (chorus::sdk::HostAbortRequested()) {
        Fail(CHORUS_ABORTED, "socket: rank ", rank, " stopped waiting for its lower ranks");
      }
      const int64_t left = MillisecondsUntil(deadline);
      if (left == 0) {
        Fail(CHORUS_TIMEOUT, "socket: rank ", rank, " waited ", timeout_ms, " ms for ", waiting,
             " lower rank(s) to connect; are they started, with the same job?");
      }
      pollfd p{listener.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, kPollMs))) != 1) continue;
      Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      const int peer = fd.valid() ? Admit(fd.get(), deadline) : -1;
      if (peer >= 0) {
        peers[static_cast<size_t>(peer)].fd = std::move(fd);
        --waiting;
      }
    }
    for (Peer& p : peers) {
      if (p.fd.valid()) SetNoDelay(p.fd.get());
    }
  }

  // The connector's side, after its hello: the listener's greeting, then the proofs.
  void ProveTo(int peer, const Hello& mine, Clock::time_point deadline) {
    const int fd = peers[static_cast<size_t>(peer)].fd.get();
    Hello theirs;
    ReceiveOrFail(fd, &theirs, sizeof theirs, deadline, peer, "its greeting");
    if (theirs.magic != kMagic || theirs.rank != peer || theirs.size != size) {
      Fail(CHORUS_INVALID_ARGUMENT, "socket: rank ", rank, " connected to the address rank ", peer,
           " published, but what answered is not rank ", peer, " of a job of ", size,
           " ranks (a stale address, or ranks given different sizes)");
    }
    if (theirs.has_secret != mine.has_secret) {
      Fail(CHORUS_INVALID_ARGUMENT, "socket: rank ", peer, (theirs.has_secret ? " has" : " has no"),
           " job secret but rank ", rank, (theirs.has_secret ? " has none" : " has one"), "; ",
           kSecretHint);
    }
    const std::string link = Link(rank, peer, size);
    const Proof proof = ProofOf(kConnectorRole, theirs, link);
    SendOrFail(fd, &proof, sizeof proof, deadline, peer, "its proof");
    Proof answer;
    ReceiveOrFail(fd, &answer, sizeof answer, deadline, peer, "its proof");
    if (!ProofHolds(answer, kListenerRole, mine, link)) {
      Fail(CHORUS_INVALID_ARGUMENT, "socket: rank ", rank, " connected to the address rank ", peer,
           " published, but what answered does not hold the job's secret; ", kSecretHint);
    }
  }

  // The listener's side: the rank of a lower rank that proved the job's secret, or -1 for a
  // connection dropped (another program, a port scanner: not the job's failure). A member that
  // proved it but disagrees on the job fails the set-up, naming the fix.
  int Admit(int fd, Clock::time_point deadline) {
    Hello greeting = MakeHello(rank, size);
    Hello hello;
    Proof proof;
    std::string why;
    const Clock::time_point hello_by = std::min(deadline, Clock::now() + kHelloWithin);
    if (!MoveAll(fd, &greeting, sizeof greeting, true, hello_by, &why) ||
        !MoveAll(fd, &hello, sizeof hello, false, hello_by, &why)) {
      return Drop(why);
    }
    if (hello.magic != kMagic) return Drop("it is not a chorus socket template endpoint");
    // A connector whose secret mode differs fails on its side, naming the fix.
    if (hello.has_secret != greeting.has_secret) return Drop("it has another job secret setting");
    if (!MoveAll(fd, &proof, sizeof proof, false, deadline, &why)) return Drop(why);
    const std::string link = Link(hello.rank, rank, hello.size);
    if (!ProofHolds(proof, kConnectorRole, greeting, link)) {
      return Drop("it does not hold the job's secret");
    }
    if (hello.size != size) {
      Fail(CHORUS_INVALID_ARGUMENT, "socket: rank ", hello.rank, " was given a job of ", hello.size,
           " ranks, rank ", rank, " one of ", size, " (every rank must be given the same size)");
    }
    if (hello.rank < 0 || hello.rank >= rank || peers[static_cast<size_t>(hello.rank)].fd.valid()) {
      Fail(CHORUS_INVALID_ARGUMENT, "socket: rank ", rank, " was contacted by a rank ", hello.rank,
           ", which it connects to itself or admitted already (are two processes given the same "
           "rank?)");
    }
    const Proof mine = ProofOf(kListenerRole, hello, link);
    SendOrFail(fd, &mine, sizeof mine, deadline, hello.rank, "its proof");
    return hello.rank;
  }

  int Drop(const std::string& why) const {
    chorus::sdk::Log(CHORUS_LOG_WARN, "socket: rank " + std::to_string(rank) +
                                          " dropped a connection to its listener: " + why);
    return -1;
  }

  void SendOrFail(int fd, const void* data, size_t bytes, Clock::time_point deadline, int peer,
                  const char* what) const {
    std::string why;
    if (!MoveAll(fd, const_cast<void*>(data), bytes, true, deadline, &why)) {
      Fail(CHORUS_PEER_LOST, "socket: rank ", rank, " could not send ", what, " to rank ", peer,
           ": ", why);
    }
  }
  void ReceiveOrFail(int fd, void* data, size_t bytes, Clock::time_point deadline, int peer,
                     const char* what) const {
    std::string why;
    if (!MoveAll(fd, data, bytes, false, deadline, &why)) {
      Fail(CHORUS_PEER_LOST, "socket: rank ", rank, " waited for ", what, " from rank ", peer, ": ",
           why);
    }
  }

  // ---- Sends and receives (any thread) ---------------------------------------------------------

  Request* Send(int peer, uint64_t tag, void* data, size_t bytes) {
    auto request = std::make_unique<Request>(true, peer, tag, data, bytes);
    std::lock_guard<std::mutex> lock(mutex);
    if (failed) Fail(failure, failure_message);
    if (peer == rank) {  // to itself: delivered here, as from a peer
      std::vector<char> copy = peers[static_cast<size_t>(rank)].TakeBuffer(bytes);
      if (bytes > 0) std::memcpy(copy.data(), data, bytes);
      ArrivedLocked(rank, tag, std::move(copy));
      request->Complete(CHORUS_OK);
      return request.release();
    }
    Peer& p = peers[static_cast<size_t>(peer)];
    if (p.lost) Fail(CHORUS_PEER_LOST, p.lost_message);
    Request* r = request.get();
    if (bytes < kRendezvousBytes) {
      p.out.push_back({Frame{kEager, 0, tag, bytes, 0}, r->data, 0, r});
    } else {  // announced now, sent when the receiver asks (kClearToSend)
      const uint64_t id = p.next_id++;
      p.out.push_back({Frame{kAnnounce, 0, tag, bytes, id}, nullptr, 0, nullptr});
      p.announced[id] = r;
    }
    request.release();  // the endpoint completes it from here on
    // The caller writes what the socket takes now (a small message needs no thread hop); the
    // progress thread writes the rest.
    WriteLocked(peer, kIoBudget);
    if (!p.out.empty()) Wake();
    return r;
  }

  Request* Receive(int peer, uint64_t tag, void* data, size_t bytes) {
    auto request = std::make_unique<Request>(false, peer, tag, data, bytes);
    std::lock_guard<std::mutex> lock(mutex);
    if (failed) Fail(failure, failure_message);
    Peer& p = peers[static_cast<size_t>(peer)];
    const auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                                 [tag](const Unexpected& u) { return u.tag == tag; });
    if (it != p.unexpected.end()) {  // it came first (also from a peer lost since)
      Unexpected message = std::move(*it);
      p.unexpected.erase(it);
      DeliverLocked(peer, request.get(), std::move(message));
    } else if (p.lost) {
      Fail(CHORUS_PEER_LOST, p.lost_message);
    } else {
      p.posted.push_back(request.get());
    }
    return request.release();
  }

  // ---- Matching (under the mutex) --------------------------------------------------------------

  std::string Mismatch(int peer, uint64_t tag, size_t posted, size_t sent) const {
    return "socket: rank " + std::to_string(rank) + " posted a receive of " +
           std::to_string(posted) + " bytes from rank " + std::to_string(peer) + " with tag " +
           std::to_string(tag) + ", but the message has " + std::to_string(sent) +
           " bytes (a receive must name the byte count sent)";
  }

  // Hands message `m` to receive `r`: copies it, asks the sender for it (announced), or fails.
  void DeliverLocked(int peer, Request* r, Unexpected&& m) {
    Peer& p = peers[static_cast<size_t>(peer)];
    if (m.bytes != r->bytes) {
      r->Complete(CHORUS_INVALID_ARGUMENT, Mismatch(peer, m.tag, r->bytes, m.bytes));
      if (m.announced && !p.lost) QueueLocked(peer, Frame{kRefuse, 0, m.tag, m.bytes, m.id});
    } else if (!m.announced) {
      if (m.bytes > 0) std::memcpy(r->data, m.payload.data(), m.bytes);
      r->Complete(CHORUS_OK);
    } else if (p.lost) {  // its bytes never come
      r->Complete(CHORUS_PEER_LOST, p.lost_message);
    } else {
      p.asked[m.id] = r;
      QueueLocked(peer, Frame{kClearToSend, 0, m.tag, m.bytes, m.id});
    }
    p.GiveBack(std::move(m.payload));
  }

  // A whole message with no receive at its start: a receive posted since takes it, else it waits.
  void ArrivedLocked(int peer, uint64_t tag, std::vector<char>&& payload) {
    Peer& p = peers[static_cast<size_t>(peer)];
    Unexpected m{tag, payload.size(), false, 0, std::move(payload)};
    if (Request* r = p.TakePosted(tag)) {
      DeliverLocked(peer, r, std::move(m));
    } else {
      p.unexpected.push_back(std::move(m));
    }
  }

  void QueueLocked(int peer, const Frame& frame) {
    peers[static_cast<size_t>(peer)].out.push_back({frame, nullptr, 0, nullptr});
    Wake();
  }

  // ---- Socket I/O (under the mutex; the progress thread, and a sender's first write) -----------

  void WriteLocked(int peer, size_t budget) {
    Peer& p = peers[static_cast<size_t>(peer)];
    while (!p.out.empty() && !p.lost && budget > 0) {
      Outgoing& o = p.out.front();
      const size_t payload = PayloadOf(o.frame);
      iovec parts[2];
      int count = 0;
      if (o.written < sizeof(Frame)) {
        parts[count++] = {reinterpret_cast<char*>(&o.frame) + o.written, sizeof(Frame) - o.written};
      }
      const size_t sent = o.written > sizeof(Frame) ? o.written - sizeof(Frame) : 0;
      if (payload > sent) parts[count++] = {const_cast<char*>(o.payload) + sent, payload - sent};
      msghdr message{};
      message.msg_iov = parts;
      message.msg_iovlen = static_cast<size_t>(count);
      const ssize_t n = ::sendmsg(p.fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) return LoseLocked(peer, ErrnoText(errno));
      o.written += static_cast<size_t>(n);
      budget -= std::min(budget, static_cast<size_t>(n));
      if (o.written == sizeof(Frame) + payload) {
        if (o.request != nullptr) o.request->Complete(CHORUS_OK);
        p.out.pop_front();
      }
    }
  }

  void ReadLocked(int peer) {
    Peer& p = peers[static_cast<size_t>(peer)];
    size_t budget = kIoBudget;
    while (!p.lost && budget > 0) {
      const bool header = p.frame_read < sizeof(Frame);
      const ssize_t n = header
                            ? ::recv(p.fd.get(), reinterpret_cast<char*>(&p.frame) + p.frame_read,
                                     sizeof(Frame) - p.frame_read, MSG_DONTWAIT)
                            : ::recv(p.fd.get(), p.into + p.payload_read,
                                     p.frame.bytes - p.payload_read, MSG_DONTWAIT);
      if (n == 0) return LoseLocked(peer, "it closed the connection");
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) return LoseLocked(peer, ErrnoText(errno));
      if (header) {
        p.frame_read += static_cast<size_t>(n);
        if (p.frame_read == sizeof(Frame)) StartFrameLocked(peer);
      } else {
        p.payload_read += static_cast<size_t>(n);
        budget -= std::min(budget, static_cast<size_t>(n));
        if (p.payload_read == p.frame.bytes) FinishFrameLocked(peer);
      }
    }
  }

  // A frame's header is in: decides where its payload goes, or acts on a control frame.
  void StartFrameLocked(int peer) {
    Peer& p = peers[static_cast<size_t>(peer)];
    const Frame& f = p.frame;
    switch (f.type) {
      case kEager:
        if (f.bytes >= kRendezvousBytes) return LoseLocked(peer, "it sent a malformed frame");
        if (Request* r = p.TakePosted(f.tag); r != nullptr && r->bytes == f.bytes) {
          p.filling = r;  // straight into the receive's buffer
          p.into = r->data;
        } else {
          if (r != nullptr) {
            r->Complete(CHORUS_INVALID_ARGUMENT, Mismatch(peer, f.tag, r->bytes, f.bytes));
            p.drop = true;
          }
          p.buffer = p.TakeBuffer(f.bytes);
          p.into = p.buffer.data();
        }
        break;
      case kData: {
        const auto it = p.asked.find(f.id);
        if (it == p.asked.end() || it->second->bytes != f.bytes) {
          return LoseLocked(peer, "it sent data nobody asked for");
        }
        p.filling = it->second;
        p.into = p.filling->data;
        p.asked.erase(it);
        break;
      }
      case kAnnounce:
        if (Request* r = p.TakePosted(f.tag)) {
          DeliverLocked(peer, r, Unexpected{f.tag, f.bytes, true, f.id, {}});
        } else {
          p.unexpected.push_back(Unexpected{f.tag, f.bytes, true, f.id, {}});
        }
        break;
      case kClearToSend:
      case kRefuse: {
        const auto it = p.announced.find(f.id);
        if (it == p.announced.end()) return LoseLocked(peer, "it asked for an unknown message");
        Request* s = it->second;
        p.announced.erase(it);
        if (f.type == kClearToSend) {
          p.out.push_back({Frame{kData, 0, s->tag, s->bytes, f.id}, s->data, 0, s});
        } else {
          s->Complete(CHORUS_INVALID_ARGUMENT,
                      "socket: rank " + std::to_string(peer) + " posted a receive of another " +
                          "byte count for the " + std::to_string(s->bytes) + " bytes rank " +
                          std::to_string(rank) + " sends with tag " + std::to_string(s->tag));
        }
        break;
      }
      default:
        return LoseLocked(peer, "it sent a frame of unknown type " + std::to_string(f.type));
    }
    if (PayloadOf(f) == 0) FinishFrameLocked(peer);
  }

  void FinishFrameLocked(int peer) {
    Peer& p = peers[static_cast<size_t>(peer)];
    if (p.filling != nullptr) {
      p.filling->Complete(CHORUS_OK);
    } else if (p.frame.type == kEager && !p.drop) {
      ArrivedLocked(peer, p.frame.tag, std::move(p.buffer));
    } else {
      p.GiveBack(std::move(p.buffer));
    }
    p.buffer = {};
    p.frame_read = p.payload_read = 0;
    p.into = nullptr;
    p.filling = nullptr;
    p.drop = false;
  }

  // ---- Failures ---------------------------------------------------------------------------------

  // Completes everything pending with `peer` with `status`.
  void EndPendingLocked(int peer, chorus_status status, const std::string& message) {
    Peer& p = peers[static_cast<size_t>(peer)];
    for (Outgoing& o : p.out) {
      if (o.request != nullptr) o.request->Complete(status, message);
    }
    for (auto* queue : {&p.announced, &p.asked}) {
      for (auto& [id, r] : *queue) r->Complete(status, message);
      queue->clear();
    }
    for (Request* r : p.posted) r->Complete(status, message);
    if (p.filling != nullptr) p.filling->Complete(status, message);
    p.out.clear();
    p.posted.clear();
    p.filling = nullptr;
  }

  // The connection to `peer` broke (it closed its endpoint, or its process died): everything
  // pending with it fails, naming it; messages that came whole stay deliverable.
  void LoseLocked(int peer, const std::string& why) {
    Peer& p = peers[static_cast<size_t>(peer)];
    if (p.lost) return;
    p.lost = true;
    p.lost_message = "socket: rank " + std::to_string(rank) + " lost its connection to rank " +
                     std::to_string(peer) + " (" + why + "): rank " + std::to_string(peer) +
                     " destroyed or aborted its endpoint, or its process ended";
    ::shutdown(p.fd.get(), SHUT_RDWR);
    EndPendingLocked(peer, CHORUS_PEER_LOST, p.lost_message);
  }

  // abort(), destroy or the host's abort flag: everything pending and later fails.
  void FailAllLocked(chorus_status status, const std::string& message) {
    if (failed) return;
    failed = true;
    failure = status;
    failure_message = message;
    for (int peer = 0; peer < size; ++peer) {
      Peer& p = peers[static_cast<size_t>(peer)];
      // shutdown, not close: the progress thread may be polling the socket. The peer reads the
      // end of the stream and fails what it has pending with this rank.
      if (p.fd.valid()) ::shutdown(p.fd.get(), SHUT_RDWR);
      EndPendingLocked(peer, status, message);
      p.unexpected.clear();
      p.lost = true;
    }
    Wake();
  }

  // ---- The progress thread ---------------------------------------------------------------------

  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd.get(), &one, sizeof one);
  }

  void ProgressLoop() {
    std::unique_lock<std::mutex> lock(mutex);
    try {
      while (!stopping) {
        fds.assign(1, pollfd{wake_fd.get(), POLLIN, 0});  // reused: no allocation per turn
        owners.assign(1, -1);
        for (int peer = 0; peer < size; ++peer) {
          const Peer& p = peers[static_cast<size_t>(peer)];
          if (!p.fd.valid() || p.lost) continue;
          fds.push_back(
              {p.fd.get(), static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
          owners.push_back(peer);
        }
        lock.unlock();
        const int ready = ::poll(fds.data(), fds.size(), kPollMs);
        uint64_t wakes = 0;
        if (fds[0].revents != 0) (void)!::read(wake_fd.get(), &wakes, sizeof wakes);
        lock.lock();
        // This thread sees only the process-wide flag: a process that stops.
        if (chorus::sdk::HostAbortRequested()) {
          FailAllLocked(CHORUS_ABORTED, "socket: the process is stopping (the host's abort flag)");
        }
        for (size_t i = 1; ready > 0 && i < fds.size(); ++i) {
          const int peer = owners[i];
          if (fds[i].revents == 0 || peers[static_cast<size_t>(peer)].lost) continue;
          if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) ReadLocked(peer);
          WriteLocked(peer, kIoBudget);
        }
      }
    } catch (const std::exception& e) {  // out of memory: fail the work rather than the process
      if (!lock.owns_lock()) lock.lock();
      FailAllLocked(CHORUS_INTERNAL,
                    std::string("socket: the progress thread failed: ") + e.what());
    }
  }

  const int rank, size;
  std::mutex mutex;  // guards everything below, but wake_fd and progress (set once)
  std::vector<Peer> peers;
  bool failed = false;  // aborted or destroyed: every call fails with `failure`
  chorus_status failure = CHORUS_OK;
  std::string failure_message;
  bool stopping = false;
  Fd wake_fd;  // an eventfd that wakes the progress thread from poll()
  std::thread progress;
  std::vector<pollfd> fds;  // the progress thread's, kept across turns
  std::vector<int> owners;
};

namespace {

using Endpoint = chorus_transport_endpoint;

// ---- The table's functions ---------------------------------------------------------------------

chorus_status Create(const chorus_transport_create_args* args, Endpoint** out) {
  return chorus::sdk::Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "socket create: out is NULL");
    *out = nullptr;
    const auto& a = chorus::sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_transport_create_args, num_options), "socket create");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "socket create: rank ", a.rank, " of size ", a.size,
           " is not a rank");
    }
    const std::string_view address = chorus::sdk::CreateAddress(a);
    auto endpoint = std::make_unique<Endpoint>(a.rank, a.size);
    endpoint->Connect(chorus::sdk::StoreView(a.store),
                      address.empty() ? "127.0.0.1" : std::string(address), a.timeout_ms);
    endpoint->progress = std::thread([e = endpoint.get()] { e->ProgressLoop(); });
    *out = endpoint.release();
  });
}

// Returns at once: pending requests end with ABORTED, the peers read the end of the stream.
void Destroy(Endpoint* endpoint) { delete endpoint; }

// The checks every isend and irecv starts with; clears *request.
const chorus_p2p_args& Start(Endpoint* endpoint, const chorus_p2p_args* args,
                             chorus_request** request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": request is NULL");
  *request = nullptr;
  if (endpoint == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": endpoint is NULL");
  const auto& a = chorus::sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_p2p_args, bytes), what);
  if (a.peer < 0 || a.peer >= endpoint->size) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": peer ", a.peer, " is not a rank of ", endpoint->size);
  }
  if (a.bytes > 0 && a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": data is NULL");
  return a;
}

chorus_status Isend(Endpoint* endpoint, const chorus_p2p_args* args, chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = Start(endpoint, args, request, "socket isend");
    *request = endpoint->Send(a.peer, a.tag, a.data, a.bytes);
  });
}

chorus_status Irecv(Endpoint* endpoint, const chorus_p2p_args* args, chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = Start(endpoint, args, request, "socket irecv");
    *request = endpoint->Receive(a.peer, a.tag, a.data, a.bytes);
  });
}

void Abort(Endpoint* endpoint) {
  if (endpoint == nullptr) return;
  std::lock_guard<std::mutex> lock(endpoint->mutex);
  endpoint->FailAllLocked(CHORUS_ABORTED, "socket: the endpoint of rank " +
                                              std::to_string(endpoint->rank) + " was aborted");
}

// A finished request's status, with its message as this thread's last error.
chorus_status Result(const chorus_request& r) {
  return r.status == CHORUS_OK ? CHORUS_OK : chorus::sdk::SetError(r.status, r.message);
}

chorus_status RequestTest(chorus_request* request, int* done) {
  if (request == nullptr || done == nullptr) {
    return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "request_test: a NULL argument");
  }
  std::lock_guard<std::mutex> lock(request->mutex);
  *done = request->done ? 1 : 0;
  return request->done ? Result(*request) : CHORUS_OK;
}

// Sleeps until the request completes or timeout_ms passes; the progress thread does the work.
chorus_status RequestWait(chorus_request* request, int64_t timeout_ms) {
  if (request == nullptr) {
    return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "request_wait: request is NULL");
  }
  std::unique_lock<std::mutex> lock(request->mutex);
  const auto done = [request] { return request->done; };
  const Clock::time_point deadline = DeadlineAfter(timeout_ms);
  if (deadline == Clock::time_point::max()) {
    request->finished.wait(lock, done);
  } else if (!request->finished.wait_until(lock, deadline, done)) {
    return chorus::sdk::SetError(
        CHORUS_TIMEOUT, std::string("socket: the ") + (request->send ? "send to" : "receive from") +
                            " rank " + std::to_string(request->peer) + " with tag " +
                            std::to_string(request->tag) + " did not complete in " +
                            std::to_string(timeout_ms) + " ms (the request is still live)");
  }
  return Result(*request);
}

// On a finished request, or one whose endpoint was aborted or destroyed (plugin.h).
void RequestFree(chorus_request* request) { delete request; }

// ---- What it carries, and how well (ABI 1.3) ---------------------------------------------------
// The core makes a collective "<algorithm>@socket" of every algorithm loaded and this transport,
// and AUTO scores it the algorithm's score x this one / 100 (plugin.h's bands, sdk/README.md
// section 5: 1-9 works everywhere, where the core's reference core_ring = ring@tcp scores 50 x 10
// / 100 = 5; 10-49 general purpose and faster; 50-89 specialists; 90-100 a vendor's library on its
// own hardware). Until measured, it scores 1 as every template: its pairs round down to 0 (ring's
// 50 x 1 / 100), AUTO never picks them and only a name selects one (CHORUS_COMMUNICATION=
// ring@socket); chorus-conformance and chorus-info say so. Raise it only where chorus-bench
// --transports tcp,socket measured it faster than the core's tcp (10), by operation, size and job
// shape. It carries no tf.distribute RING nor NCCL: those requests get 0.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 1 : 0;
}
// Host memory, any job shape; a transport's ops are ignored (the algorithm's count).
const chorus_capabilities kCapabilities = chorus::sdk::Capabilities(
    chorus::sdk::kHostMemory, CHORUS_SHAPE_ANY, chorus::sdk::kAllCollectiveOps, Score);

// ---- The plugin table -------------------------------------------------------------------------

const chorus_transport_api kTransport = [] {
  chorus_transport_api t{};
  t.struct_size = sizeof(t);
  t.name = "socket";
  t.create = Create;
  t.destroy = Destroy;
  t.isend = Isend;
  t.irecv = Irecv;
  t.abort = Abort;
  t.capabilities = &kCapabilities;
  return t;
}();

const chorus_plugin kPlugin = [] {
  chorus_plugin t = chorus::sdk::PluginTable(
      "template_socket",  // must match the file name: libchorus-template_socket.so
      "1.0.0", "SDK template: a transport over TCP sockets (eager and rendezvous messages)");
  t.request_test = RequestTest;  // this plugin hands out requests: its own three functions
  t.request_wait = RequestWait;
  t.request_free = RequestFree;
  t.transport = &kTransport;
  return t;
}();

}  // namespace

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &kPlugin;
}
