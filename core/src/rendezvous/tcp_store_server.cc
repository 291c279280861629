// The TCP store's server. One background thread serves every connection with poll(): the store
// is a plain map that only this thread touches, so a SET can answer the GETs waiting on its key
// at once, with no locks and no thread per worker (a job has up to a few thousand workers, which
// poll() handles well). A request that must wait (GET, WAIT) parks its connection until the key
// arrives or the request's deadline passes; later requests on that connection stay buffered, so
// answers keep their order, while every other connection is served meanwhile.
//
// Admission: with a job secret, a connection is served only once it proved it holds the secret
// (tcp_store_protocol.h); until then it may send one small frame, for a bounded time. Whatever a
// connection sends, what the server holds for it is bounded (kMax* below), so no client, member
// or not, can grow the server's memory without limit or starve the others.
#include <chorus/base/error.h>
#include <chorus/rendezvous/rendezvous.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "base/job_secret.h"
#include "base/logging.h"
#include "base/socket_util.h"
#include "rendezvous/kv_store_internal.h"
#include "rendezvous/own_clients.h"
#include "rendezvous/tcp_store_protocol.h"

namespace chorus {
namespace {

using tcp_store::Op;
using tcp_store::Request;
using tcp_store::Response;

// Connections at once; more are closed at accept.
constexpr size_t kMaxConnections = 8192;
// Connections not yet admitted at once; a new one closes the oldest.
constexpr size_t kMaxUnadmitted = 64;
// How long a new connection has to prove it holds the job's secret.
constexpr std::chrono::milliseconds kAdmissionTimeout{10000};
// Received bytes not yet served, over all connections; past it the largest holder is dropped.
constexpr size_t kMaxBufferedInputBytes = size_t{256} << 20;
// Answers a client has not read yet; past it the client is dropped.
constexpr size_t kMaxPendingOutputBytes = size_t{256} << 20;
// What the serving thread reads from one connection before it turns to the others.
constexpr size_t kReadBurstBytes = size_t{4} << 20;
// Refusals logged one by one; later ones every 100th.
constexpr uint64_t kRefusalsLogged = 5;

// A GET or WAIT that parked its connection.
struct Waiter {
  Request request;
  Clock::time_point deadline;
};

struct Connection {
  UniqueFd fd;
  std::string peer;  // the client's end, "address:port"; for the linger and for messages
  Bytes input;       // received bytes not yet parsed into requests
  Bytes output;      // responses not yet sent
  size_t output_sent = 0;
  bool admitted = false;  // proved the job's secret, or the job has none
  std::string challenge;  // the greeting's, while not admitted
  Clock::time_point admit_by = Clock::time_point::max();
  std::string name;  // from HELLO; empty when it never said hello
  bool said_bye = false;
  bool heartbeat = false;             // it asked for kHealth: it reports its client's liveness
  Clock::time_point last_heard = {};  // when bytes last arrived on it
  bool closing = false;               // to be closed at the end of this loop turn
  std::optional<Waiter> waiter;
};

class Server : public TcpStoreServer {
 public:
  Server(UniqueFd listener, UniqueFd wake_read, UniqueFd wake_write, std::string where,
         std::chrono::milliseconds linger, int other_members, JobSecret secret)
      : secret_(std::move(secret)),
        listener_(std::move(listener)),
        wake_read_(std::move(wake_read)),
        wake_write_(std::move(wake_write)),
        port_(LocalPort(listener_.get())),
        where_(std::move(where)),
        linger_(linger),
        other_members_(other_members) {
    thread_ = std::thread([this] { Run(); });
  }

  ~Server() override {
    stop_.store(true);
    Wake();
    thread_.join();
    // Run() closed every connection and the listener on its way out, once the clients of other
    // processes had left or the linger had passed.
  }

  uint16_t port() const override { return port_; }

  void StopWaitingFor(const std::string& name) override {
    {
      std::lock_guard<std::mutex> lock(released_mutex_);
      released_.insert(name);
    }
    Wake();
  }

 private:
  void Wake() {
    const char byte = 1;
    // The pipe holds 64 KiB, so this cannot block; EAGAIN means a wake-up is already pending.
    while (::write(wake_write_.get(), &byte, 1) < 0 && errno == EINTR) {
    }
  }

  void Run() noexcept {
    try {
      Loop();
    } catch (const std::exception& e) {
      Log().error("rendezvous: the tcp store on {} stopped: {}", where_, e.what());
    } catch (...) {
      Log().error("rendezvous: the tcp store on {} stopped", where_);
    }
    // Close everything, so clients learn at once that the store is gone.
    connections_.clear();
    listener_.reset();
  }

  void Loop() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;  // ids[i] is the connection of fds[i + 2]
    Clock::time_point linger_deadline = Clock::time_point::max();
    for (;;) {
      if (stop_.load()) {
        if (linger_deadline == Clock::time_point::max()) linger_deadline = StartLinger();
        if (AllMembersLeft()) break;
        if (Clock::now() >= linger_deadline) {
          Log().warn(
              "rendezvous: the tcp store on {} stops serving after waiting {} ms for its "
              "members to leave; still connected: {}; {} of {} other members said hello (raise "
              "CHORUS_TIMEOUT_SECONDS if they need longer)",
              where_, linger_.count(), OtherClients().empty() ? "none" : Names(OtherClients()),
              members_seen_.size(), other_members_);
          break;
        }
      }
      fds.clear();
      ids.clear();
      fds.push_back({wake_read_.get(), POLLIN, 0});
      // After EMFILE the listener stays readable: leave it out for a moment instead of spinning.
      fds.push_back(
          {listener_.get(), Clock::now() < accept_paused_until_ ? short{0} : short{POLLIN}, 0});
      for (auto& [id, connection] : connections_) {
        // A connection whose unserved input is full is not read until it is served (a GET
        // parked before it), so it cannot make poll() spin either; hang-ups still show.
        short events = connection.input.size() >= InputCap(connection) ? short{0} : short{POLLIN};
        if (connection.output_sent < connection.output.size()) events |= POLLOUT;
        fds.push_back({connection.fd.get(), events, 0});
        ids.push_back(id);
      }
      Clock::time_point wake = std::min(NextDeadline(), linger_deadline);
      if (Clock::now() < accept_paused_until_) wake = std::min(wake, accept_paused_until_);
      const int n = ::poll(fds.data(), fds.size(), PollTimeoutMs(wake));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error(CHORUS_INTERNAL, "poll: " + ErrnoText(errno));
      }
      if (fds[0].revents != 0) DrainWakePipe();
      if (fds[1].revents != 0) AcceptAll();
      for (size_t i = 0; i < ids.size(); ++i) {
        const short revents = fds[i + 2].revents;
        if (revents == 0) continue;
        Connection& connection = connections_.at(ids[i]);
        if (connection.closing) continue;
        if (revents & (POLLIN | POLLHUP | POLLERR)) ReadAndServe(ids[i], connection);
        if (!connection.closing && (revents & POLLOUT)) Flush(connection);
      }
      ExpireWaiters();
      ExpireAdmissions();
      DropLargestBufferWhileOverBudget();
      // Closing records lost clients, which can answer waiters, whose connections may then
      // serve requests they had queued, which can close connections...
      for (;;) {
        CloseFinished();
        if (runnable_.empty()) break;
        ServeRunnable();
      }
    }
  }

  // The connections of other processes: the members the server waits for when destroyed. A
  // connection of this process (the destroying member's own store) never holds it, nor one of a
  // member the server was told to stop waiting for.
  std::vector<const Connection*> OtherClients() const {
    const std::set<std::string> released = Released();
    std::vector<const Connection*> others;
    for (const auto& [id, connection] : connections_) {
      // One that never proved the job's secret is no member, so it cannot hold the store open.
      if (connection.admitted && !tcp_store::IsOwnClient(connection.peer) &&
          released.count(connection.name) == 0) {
        others.push_back(&connection);
      }
    }
    return others;
  }

  std::set<std::string> Released() const {
    std::lock_guard<std::mutex> lock(released_mutex_);
    return released_;
  }

  static std::string Names(const std::vector<const Connection*>& connections) {
    std::string names;
    for (const Connection* connection : connections) {
      names += (names.empty() ? "" : ", ") + Describe(*connection);
    }
    return names;
  }

  // Every member of another process came (as many names as other_members_) and went.
  bool AllMembersLeft() const {
    std::set<std::string> came = Released();
    came.insert(members_seen_.begin(), members_seen_.end());
    return OtherClients().empty() &&
           came.size() >= static_cast<size_t>(std::max(other_members_, 0));
  }

  Clock::time_point StartLinger() const {
    if (const auto others = OtherClients(); !others.empty()) {
      Log().debug("rendezvous: the tcp store on {} serves {} until they leave, up to {} ms", where_,
                  Names(others), linger_.count());
    }
    return DeadlineAfter(linger_);
  }

  Clock::time_point NextDeadline() const {
    Clock::time_point next = Clock::time_point::max();
    for (const auto& [id, connection] : connections_) {
      if (connection.waiter && connection.waiter->deadline < next) {
        next = connection.waiter->deadline;
      }
      next = std::min(next, connection.admit_by);
    }
    return next;
  }

  void DrainWakePipe() {
    char buffer[64];
    while (::read(wake_read_.get(), buffer, sizeof(buffer)) > 0) {
    }
  }

  void AcceptAll() {
    for (;;) {
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          Log().warn("rendezvous: the tcp store on {} cannot accept: {}", where_, ErrnoText(errno));
          accept_paused_until_ = DeadlineAfter(std::chrono::milliseconds(100));
        }
        return;
      }
      UniqueFd accepted(fd);
      if (connections_.size() >= kMaxConnections) {
        Refused(PeerEndpoint(fd),
                "the store already serves " + std::to_string(kMaxConnections) + " connections");
        continue;
      }
      CloseOldestUnadmittedIfFull();
      SetNoDelay(fd);
      Connection& connection = connections_[next_id_++];
      connection.fd = std::move(accepted);
      connection.peer = PeerEndpoint(fd);
      connection.last_heard = Clock::now();
      tcp_store::Greeting greeting;
      if (secret_.present()) {
        greeting.secret_required = true;
        greeting.challenge = JobSecret::Challenge();
        connection.challenge = greeting.challenge;
        connection.admit_by = DeadlineAfter(kAdmissionTimeout);
      } else {
        connection.admitted = true;
      }
      const Bytes frame = tcp_store::EncodeGreeting(greeting);
      connection.output.assign(frame.begin(), frame.end());
      Flush(connection);
    }
  }

  void CloseOldestUnadmittedIfFull() {
    size_t unadmitted = 0;
    Connection* oldest = nullptr;  // the map is ordered by id, so the first is the oldest
    for (auto& [id, connection] : connections_) {
      if (connection.admitted || connection.closing) continue;
      if (oldest == nullptr) oldest = &connection;
      ++unadmitted;
    }
    if (unadmitted < kMaxUnadmitted || oldest == nullptr) return;
    Refused(oldest->peer, "more than " + std::to_string(kMaxUnadmitted) +
                              " connections were waiting to prove the job's secret");
    oldest->closing = true;
  }

  // Closes connections that did not prove the job's secret in time.
  void ExpireAdmissions() {
    const Clock::time_point now = Clock::now();
    for (auto& [id, connection] : connections_) {
      if (connection.admitted || connection.closing || connection.admit_by > now) continue;
      Refused(connection.peer, "it did not prove it holds the job's secret within " +
                                   std::to_string(kAdmissionTimeout.count()) + " ms");
      connection.closing = true;
    }
  }

  // Logs a refused client: the first few, then every 100th, so a flood cannot flood the log.
  void Refused(const std::string& peer, const std::string& why) {
    ++refusals_;
    if (refusals_ <= kRefusalsLogged || refusals_ % 100 == 0) {
      Log().warn("rendezvous: the tcp store on {} refused a client at {}: {} ({} refused so far)",
                 where_, peer, why, refusals_);
    }
  }

  // Bounds what clients can make the server hold in received, unserved bytes.
  void DropLargestBufferWhileOverBudget() {
    while (buffered_input_bytes_ > kMaxBufferedInputBytes) {
      Connection* largest = nullptr;
      for (auto& [id, connection] : connections_) {
        if (!connection.closing &&
            (largest == nullptr || connection.input.size() > largest->input.size())) {
          largest = &connection;
        }
      }
      if (largest == nullptr || largest->input.empty()) return;
      Log().warn(
          "rendezvous: the tcp store on {} drops {}: it sent {} bytes not yet served while the "
          "store holds {} bytes of unserved requests (at most {})",
          where_, Describe(*largest), largest->input.size(), buffered_input_bytes_,
          kMaxBufferedInputBytes);
      DropInput(*largest);
      largest->closing = true;
    }
  }

  static std::string Describe(const Connection& connection) {
    return connection.name.empty() ? "a client at " + connection.peer
                                   : "'" + connection.name + "' (" + connection.peer + ")";
  }

  void DropInput(Connection& connection) {
    buffered_input_bytes_ -= connection.input.size();
    connection.input.clear();
  }

  // A connection holds at most one frame (and one read) unserved: the rest waits in the kernel.
  static size_t InputCap(const Connection& connection) {
    return tcp_store::kFrameHeaderBytes + 64 * 1024 +
           (connection.admitted ? tcp_store::kMaxFrameBodyBytes
                                : tcp_store::kMaxAdmissionBodyBytes);
  }

  // Whether the first unserved frame declares more than this connection may send.
  static bool FirstFrameTooLarge(const Connection& connection) {
    if (connection.input.size() < tcp_store::kFrameHeaderBytes) return false;
    try {
      const uint32_t length = tcp_store::DecodeFrameLength(connection.input.data());
      return !connection.admitted && length > tcp_store::kMaxAdmissionBodyBytes;
    } catch (const Error&) {
      return true;  // above kMaxFrameBodyBytes; Serve says so
    }
  }

  void ReadAndServe(uint64_t id, Connection& connection) {
    uint8_t buffer[64 * 1024];
    size_t read_now = 0;
    // At most kReadBurstBytes per connection per turn of the loop: a client sending a large
    // value shares the thread with the others' small requests instead of holding it for the
    // whole value (a 64 MiB SET took 0.8 s on a 2-core VM, and a GET of another process waiting
    // behind two of them outlived its client's 2 s grace).
    while (connection.input.size() < InputCap(connection) && read_now < kReadBurstBytes) {
      const ssize_t n = ::recv(connection.fd.get(), buffer, sizeof(buffer), 0);
      if (n > 0) {
        ReserveFirstFrame(connection);
        connection.input.insert(connection.input.end(), buffer, buffer + n);
        buffered_input_bytes_ += static_cast<size_t>(n);
        read_now += static_cast<size_t>(n);
        connection.last_heard = Clock::now();
        // A frame declared too large is refused at its header (below), before its body is read.
        if (FirstFrameTooLarge(connection)) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // 0: the client closed its end; anything else: the connection broke. Either way it is
      // gone, though requests it sent before (BYE among them) are still served below.
      connection.closing = true;
      break;
    }
    Serve(id, connection);
  }

  // Once the first frame's header is in, room for the whole frame at once: growing a 64 MiB
  // value by doubling copies it again and again.
  static void ReserveFirstFrame(Connection& connection) {
    if (connection.input.size() < tcp_store::kFrameHeaderBytes) return;
    try {
      const size_t frame =
          tcp_store::kFrameHeaderBytes + tcp_store::DecodeFrameLength(connection.input.data());
      if (frame <= InputCap(connection) && connection.input.capacity() < frame) {
        connection.input.reserve(frame);
      }
    } catch (const Error&) {
      // Too large: FirstFrameTooLarge refuses it.
    }
  }

  // Serves the complete requests in the connection's input until one must wait.
  void Serve(uint64_t id, Connection& connection) {
    size_t consumed = 0;
    try {
      while (!connection.waiter) {
        const size_t left = connection.input.size() - consumed;
        if (left < tcp_store::kFrameHeaderBytes) break;
        const uint8_t* frame = connection.input.data() + consumed;
        const uint32_t length = tcp_store::DecodeFrameLength(frame);
        if (!connection.admitted && length > tcp_store::kMaxAdmissionBodyBytes) {
          throw Error(CHORUS_INVALID_ARGUMENT, "it sent a frame of " + std::to_string(length) +
                                                   " bytes before proving the job's secret");
        }
        if (left < tcp_store::kFrameHeaderBytes + length) break;
        Request request = tcp_store::DecodeRequest(frame + tcp_store::kFrameHeaderBytes, length);
        consumed += tcp_store::kFrameHeaderBytes + length;
        if (connection.admitted) {
          Handle(id, connection, std::move(request));
        } else {
          Admit(connection, request);
        }
      }
    } catch (const std::exception& e) {
      if (connection.admitted) {
        Log().warn("rendezvous: the tcp store on {} drops {}: {}", where_, Describe(connection),
                   e.what());
      } else {
        Refused(connection.peer, e.what());
      }
      connection.closing = true;
      DropInput(connection);
      return;
    }
    buffered_input_bytes_ -= consumed;
    connection.input.erase(connection.input.begin(), connection.input.begin() + consumed);
    ReleaseIfLarge(connection.input);
  }

  // An emptied buffer that held a large value gives its memory back.
  static void ReleaseIfLarge(Bytes& buffer) {
    if (buffer.empty() && buffer.capacity() > kReadBurstBytes) Bytes().swap(buffer);
  }

  // A not yet admitted connection's request: it must be AUTH with a right proof.
  void Admit(Connection& connection, const Request& request) {
    if (request.op != Op::kAuth || request.keys.size() != 1 ||
        request.keys[0].size() != JobSecret::kChallengeBytes ||
        request.value.size() != JobSecret::kProofBytes) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "it did not prove it holds the job's secret (its first request is not AUTH)");
    }
    const std::string& client_challenge = request.keys[0];
    if (!secret_.Verify(request.value.data(), tcp_store::kClientRole,
                        {connection.challenge, client_challenge})) {
      Reply(connection, {CHORUS_INVALID_ARGUMENT,
                         ToBytes("the rendezvous store at " + where_ +
                                 " refused this process: it does not hold the job's secret; " +
                                 kJobSecretHint)});
      throw Error(CHORUS_INVALID_ARGUMENT, "its proof of the job's secret is wrong");
    }
    const Digest256 proof =
        secret_.Prove(tcp_store::kServerRole, {connection.challenge, client_challenge});
    connection.admitted = true;
    connection.admit_by = Clock::time_point::max();
    connection.challenge.clear();
    Reply(connection, {CHORUS_OK, Bytes(proof.begin(), proof.end())});
  }

  void Handle(uint64_t id, Connection& connection, Request request) {
    switch (request.op) {
      case Op::kSet:
        values_[Key(request, 0)] = std::move(request.value);
        Reply(connection, {CHORUS_OK, {}});
        Changed();
        return;
      case Op::kGet:
        Key(request, 0);  // a GET names its key
        [[fallthrough]];
      case Op::kWait:
        if (Ready(request)) {
          Answer(connection, request);
        } else if (request.number <= 0) {
          Reply(connection, {CHORUS_TIMEOUT, {}});
        } else {
          const auto deadline = DeadlineAfter(std::chrono::milliseconds(request.number));
          connection.waiter = Waiter{std::move(request), deadline};
          waiting_ids_.push_back(id);
        }
        return;
      case Op::kAdd:
        Reply(connection, AddTo(Key(request, 0), request.number));
        return;
      case Op::kCheck:
        Reply(connection,
              {CHORUS_OK, {values_.count(Key(request, 0)) != 0 ? uint8_t{1} : uint8_t{0}}});
        return;
      case Op::kRemove:
        Reply(connection,
              {CHORUS_OK, {values_.erase(Key(request, 0)) != 0 ? uint8_t{1} : uint8_t{0}}});
        return;
      case Op::kHello: {
        // keys[1] names the process: one task name belongs to one process, so no other client
        // can speak for a member (and its goodbye or loss), and two workers given one task
        // name are caught here.
        const std::string& name = Key(request, 0);
        const std::string& process = Key(request, 1);
        const auto [owner, first] = process_of_name_.emplace(name, process);
        if (!first && owner->second != process) {
          Reply(connection, {CHORUS_INVALID_ARGUMENT,
                             ToBytes("rendezvous: '" + name +
                                     "' already joined the job from another process (" +
                                     owner->second + "; this one is " + process +
                                     "): are two processes given the same task in TF_CONFIG?")});
          return;
        }
        connection.name = name;
        // The client registered its end before it could say hello, so this is reliable.
        if (!tcp_store::IsOwnClient(connection.peer)) members_seen_.insert(connection.name);
        Reply(connection, {CHORUS_OK, {}});
        return;
      }
      case Op::kAuth:
        throw Error(CHORUS_INVALID_ARGUMENT, "it sent AUTH a second time");
      case Op::kBye:
        connection.said_bye = true;
        return;
      case Op::kHealth:
        connection.heartbeat = true;
        Reply(connection, {CHORUS_OK, tcp_store::EncodeHealthReport(Health())});
        return;
    }
  }

  // Each named client with an open heartbeat connection and how long it has been silent, and the
  // clients lost so far.
  tcp_store::HealthReport Health() const {
    const Clock::time_point now = Clock::now();
    std::map<std::string, int64_t> silent_ms;
    for (const auto& [id, connection] : connections_) {
      if (!connection.heartbeat || connection.closing || connection.name.empty()) continue;
      const int64_t ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - connection.last_heard)
              .count();
      auto [it, added] = silent_ms.emplace(connection.name, ms);
      if (!added) it->second = std::min(it->second, ms);
    }
    tcp_store::HealthReport report;
    for (const auto& [name, ms] : silent_ms) report.members.push_back({name, ms});
    report.lost = lost_;
    return report;
  }

  static const std::string& Key(const Request& request, size_t i) {
    if (request.keys.size() <= i) {
      throw Error(CHORUS_INTERNAL, "rendezvous: a tcp store request without its key");
    }
    return request.keys[i];
  }

  Response AddTo(const std::string& key, int64_t delta) {
    int64_t value = 0;
    try {
      if (auto it = values_.find(key); it != values_.end()) {
        value = ParseStoredCounter(it->second, key, "tcp store " + where_);
      }
      if (__builtin_add_overflow(value, delta, &value)) {
        throw Error(CHORUS_INVALID_ARGUMENT, "rendezvous: Add on '" + key + "' overflows");
      }
    } catch (const Error& e) {
      return {e.status(), ToBytes(e.what())};
    }
    values_[key] = ToBytes(std::to_string(value));
    Changed();
    return {CHORUS_OK, tcp_store::EncodeInt64(value)};
  }

  bool Ready(const Request& request) const {
    for (const std::string& key : request.keys) {
      if (values_.count(key) == 0) return false;
    }
    return true;
  }

  // Answers a GET or WAIT whose keys all exist.
  void Answer(Connection& connection, const Request& request) {
    if (request.op == Op::kGet) {
      Reply(connection, {CHORUS_OK, values_.at(request.keys[0])});
    } else {
      Reply(connection, {CHORUS_OK, {}});
    }
  }

  // A key was set: answers the waiters it completes; their connections may serve more.
  void Changed() {
    std::erase_if(waiting_ids_, [&](uint64_t id) {
      auto it = connections_.find(id);
      if (it == connections_.end() || !it->second.waiter) return true;
      Connection& connection = it->second;
      if (!Ready(connection.waiter->request)) return false;
      Answer(connection, connection.waiter->request);
      connection.waiter.reset();
      runnable_.push_back(id);
      return true;
    });
  }

  void ExpireWaiters() {
    const Clock::time_point now = Clock::now();
    std::erase_if(waiting_ids_, [&](uint64_t id) {
      auto it = connections_.find(id);
      if (it == connections_.end() || !it->second.waiter) return true;
      Connection& connection = it->second;
      if (connection.waiter->deadline > now) return false;
      // The client words the error: it knows the keys and the time-out it asked for.
      Reply(connection, {CHORUS_TIMEOUT, {}});
      connection.waiter.reset();
      runnable_.push_back(id);
      return true;
    });
  }

  void ServeRunnable() {
    while (!runnable_.empty()) {
      const uint64_t id = runnable_.front();
      runnable_.pop_front();
      auto it = connections_.find(id);
      if (it != connections_.end() && !it->second.closing) Serve(id, it->second);
    }
  }

  void Reply(Connection& connection, const Response& response) {
    Bytes frame = tcp_store::EncodeResponse(response);
    if (connection.output_sent == connection.output.size()) {
      connection.output = std::move(frame);  // nothing pending: no second copy of a large value
      connection.output_sent = 0;
    } else {
      connection.output.insert(connection.output.end(), frame.begin(), frame.end());
    }
    Flush(connection);
    if (!connection.closing &&
        connection.output.size() - connection.output_sent > kMaxPendingOutputBytes) {
      Log().warn("rendezvous: the tcp store on {} drops {}: it left {} bytes of answers unread",
                 where_, Describe(connection), connection.output.size() - connection.output_sent);
      connection.closing = true;
    }
  }

  // Sends what the socket takes now; poll() reports when it takes more.
  void Flush(Connection& connection) {
    while (connection.output_sent < connection.output.size()) {
      const ssize_t n =
          ::send(connection.fd.get(), connection.output.data() + connection.output_sent,
                 connection.output.size() - connection.output_sent, MSG_NOSIGNAL);
      if (n > 0) {
        connection.output_sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      connection.closing = true;  // the client went away; nobody to answer
      return;
    }
    connection.output.clear();
    connection.output_sent = 0;
    ReleaseIfLarge(connection.output);
  }

  // Closes the connections marked closing, recording the clients lost without a goodbye.
  void CloseFinished() {
    std::vector<std::string> lost;
    std::erase_if(connections_, [&](const auto& entry) {
      const Connection& connection = entry.second;
      if (!connection.closing) return false;
      buffered_input_bytes_ -= connection.input.size();
      if (!connection.name.empty() && !connection.said_bye) lost.push_back(connection.name);
      return true;
    });
    for (const std::string& name : lost) {
      // One record per member, though it may have had several connections. A member with a
      // connection still open is alive: it gave one up (a survivor that abandons its store
      // connection when the job fails), and is lost only if its last one closes without a
      // goodbye too. A process that dies closes all of them at once.
      if (values_.count(tcp_store::LostKey(name)) != 0) continue;
      const bool still_connected =
          std::any_of(connections_.begin(), connections_.end(),
                      [&](const auto& entry) { return entry.second.name == name; });
      if (still_connected) continue;
      Log().warn(
          "rendezvous: '{}' closed its connection to the tcp store on {} without saying goodbye; "
          "recording it as lost under '{}'",
          name, where_, tcp_store::LostKey(name));
      values_[tcp_store::LostKey(name)] = ToBytes("1");
      lost_.push_back(name);
      Bytes& list = values_[tcp_store::kLostListKey];
      if (!list.empty()) list.push_back(',');
      list.insert(list.end(), name.begin(), name.end());
    }
    if (!lost.empty()) Changed();
  }

  const JobSecret secret_;
  UniqueFd listener_;
  UniqueFd wake_read_;
  UniqueFd wake_write_;
  const uint16_t port_;
  const std::string where_;
  const std::chrono::milliseconds linger_;
  const int other_members_;
  std::atomic<bool> stop_{false};
  mutable std::mutex released_mutex_;
  std::set<std::string> released_;  // members not to wait for (StopWaitingFor)

  // Touched only by the serving thread.
  std::map<std::string, Bytes> values_;
  std::map<uint64_t, Connection> connections_;
  std::set<std::string> members_seen_;                  // names other processes said hello with
  std::map<std::string, std::string> process_of_name_;  // task name -> the process that said it
  size_t buffered_input_bytes_ = 0;                     // sum of the connections' input
  uint64_t refusals_ = 0;
  Clock::time_point accept_paused_until_ = Clock::time_point::min();
  std::vector<std::string> lost_;  // as recorded under kLostListKey, in order
  uint64_t next_id_ = 0;
  std::vector<uint64_t> waiting_ids_;  // connections with a waiter
  std::deque<uint64_t> runnable_;      // connections whose waiter was answered

  std::thread thread_;  // started in the constructor's body, once every member exists
};

}  // namespace

std::unique_ptr<TcpStoreServer> TcpStoreServer::Start(const std::string& host, uint16_t port,
                                                      std::chrono::milliseconds linger,
                                                      int other_members) {
  JobSecret secret = JobSecret::FromEnvironment();
  UniqueFd listener = ListenTcp(host, port);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    throw Error(CHORUS_INTERNAL, "rendezvous: pipe2: " + ErrnoText(errno));
  }
  UniqueFd wake_read(pipe_fds[0]);
  UniqueFd wake_write(pipe_fds[1]);
  const uint16_t bound = LocalPort(listener.get());
  const std::string where = JoinHostPort(host.empty() ? std::string("0.0.0.0") : host, bound);
  if (secret.present()) {
    Log().debug("rendezvous: serving the tcp store on {} to the holders of the job secret ({})",
                where, secret.source());
  } else {
    JobSecret::WarnOpenOnce("the rendezvous store on " + where);
  }
  return std::make_unique<Server>(std::move(listener), std::move(wake_read), std::move(wake_write),
                                  where, linger, other_members, std::move(secret));
}

}  // namespace chorus
