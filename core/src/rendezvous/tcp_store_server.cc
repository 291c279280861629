// The TCP store's server. One background thread serves every connection with poll(): the store
// is a plain map that only this thread touches, so a SET can answer the GETs waiting on its key
// at once, with no locks and no thread per worker (a job has up to a few thousand workers, which
// poll() handles well). A request that must wait (GET, WAIT) parks its connection until the key
// arrives or the request's deadline passes; later requests on that connection stay buffered, so
// answers keep their order, while every other connection is served meanwhile.
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
         std::chrono::milliseconds linger, int other_members)
      : listener_(std::move(listener)),
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
      fds.push_back({listener_.get(), POLLIN, 0});
      for (auto& [id, connection] : connections_) {
        short events = POLLIN;
        if (connection.output_sent < connection.output.size()) events |= POLLOUT;
        fds.push_back({connection.fd.get(), events, 0});
        ids.push_back(id);
      }
      const int n =
          ::poll(fds.data(), fds.size(), PollTimeoutMs(std::min(NextDeadline(), linger_deadline)));
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
      if (!tcp_store::IsOwnClient(connection.peer) && released.count(connection.name) == 0) {
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
      names += names.empty() ? "" : ", ";
      names += connection->name.empty() ? "a client at " + connection->peer
                                        : "'" + connection->name + "' (" + connection->peer + ")";
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
        }
        return;
      }
      SetNoDelay(fd);
      Connection& connection = connections_[next_id_++];
      connection.fd.reset(fd);
      connection.peer = PeerEndpoint(fd);
      connection.last_heard = Clock::now();
    }
  }

  void ReadAndServe(uint64_t id, Connection& connection) {
    uint8_t buffer[64 * 1024];
    for (;;) {
      const ssize_t n = ::recv(connection.fd.get(), buffer, sizeof(buffer), 0);
      if (n > 0) {
        connection.input.insert(connection.input.end(), buffer, buffer + n);
        connection.last_heard = Clock::now();
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

  // Serves the complete requests in the connection's input until one must wait.
  void Serve(uint64_t id, Connection& connection) {
    size_t consumed = 0;
    try {
      while (!connection.waiter) {
        const size_t left = connection.input.size() - consumed;
        if (left < tcp_store::kFrameHeaderBytes) break;
        const uint8_t* frame = connection.input.data() + consumed;
        const uint32_t length = tcp_store::DecodeFrameLength(frame);
        if (left < tcp_store::kFrameHeaderBytes + length) break;
        Request request = tcp_store::DecodeRequest(frame + tcp_store::kFrameHeaderBytes, length);
        consumed += tcp_store::kFrameHeaderBytes + length;
        Handle(id, connection, std::move(request));
      }
    } catch (const std::exception& e) {
      Log().warn("rendezvous: the tcp store on {} drops a client: {}", where_, e.what());
      connection.closing = true;
      connection.input.clear();
      return;
    }
    connection.input.erase(connection.input.begin(), connection.input.begin() + consumed);
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
      case Op::kHello:
        connection.name = Key(request, 0);
        // The client registered its end before it could say hello, so this is reliable.
        if (!tcp_store::IsOwnClient(connection.peer)) members_seen_.insert(connection.name);
        Reply(connection, {CHORUS_OK, {}});
        return;
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
    const Bytes frame = tcp_store::EncodeResponse(response);
    connection.output.insert(connection.output.end(), frame.begin(), frame.end());
    Flush(connection);
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
  }

  // Closes the connections marked closing, recording the clients lost without a goodbye.
  void CloseFinished() {
    std::vector<std::string> lost;
    std::erase_if(connections_, [&](const auto& entry) {
      const Connection& connection = entry.second;
      if (!connection.closing) return false;
      if (!connection.name.empty() && !connection.said_bye) lost.push_back(connection.name);
      return true;
    });
    for (const std::string& name : lost) {
      // One record per member, though it may have had several connections.
      if (values_.count(tcp_store::LostKey(name)) != 0) continue;
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
  std::set<std::string> members_seen_;  // names other processes said hello with
  std::vector<std::string> lost_;       // as recorded under kLostListKey, in order
  uint64_t next_id_ = 0;
  std::vector<uint64_t> waiting_ids_;  // connections with a waiter
  std::deque<uint64_t> runnable_;      // connections whose waiter was answered

  std::thread thread_;  // started in the constructor's body, once every member exists
};

}  // namespace

std::unique_ptr<TcpStoreServer> TcpStoreServer::Start(const std::string& host, uint16_t port,
                                                      std::chrono::milliseconds linger,
                                                      int other_members) {
  UniqueFd listener = ListenTcp(host, port);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    throw Error(CHORUS_INTERNAL, "rendezvous: pipe2: " + ErrnoText(errno));
  }
  UniqueFd wake_read(pipe_fds[0]);
  UniqueFd wake_write(pipe_fds[1]);
  const uint16_t bound = LocalPort(listener.get());
  const std::string where =
      (host.empty() ? std::string("0.0.0.0") : host) + ":" + std::to_string(bound);
  Log().debug("rendezvous: serving the tcp store on {}", where);
  return std::make_unique<Server>(std::move(listener), std::move(wake_read), std::move(wake_write),
                                  where, linger, other_members);
}

}  // namespace chorus
