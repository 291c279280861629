// The TCP store's client: one connection, requests serialised by a mutex. Waits happen on the
// server (the request carries the time-out); the client only bounds how long it listens, so a
// dead or hung server cannot hold it.
#include <chorus/base/error.h>
#include <chorus/rendezvous/rendezvous.h>
#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "base/job_secret.h"
#include "base/logging.h"
#include "base/socket_util.h"
#include "rendezvous/kv_store_internal.h"
#include "rendezvous/own_clients.h"
#include "rendezvous/tcp_store_health.h"
#include "rendezvous/tcp_store_protocol.h"

namespace chorus {
namespace {

using std::chrono::milliseconds;
using tcp_store::Op;
using tcp_store::Request;
using tcp_store::Response;

// How long a request that does not wait may go unanswered.
constexpr milliseconds kRequestTimeout{60000};
// How much longer than a wait's own time-out the client listens for the server's answer.
constexpr milliseconds kWaitGrace{2000};

std::string Quoted(const std::vector<std::string>& keys) {
  std::string names;
  for (const std::string& key : keys) names += (names.empty() ? "'" : ", '") + key + "'";
  return names;
}

class TcpStoreClient : public KvStore {
 public:
  TcpStoreClient(std::string address, UniqueFd fd)
      : address_(std::move(address)), endpoint_(LocalEndpoint(fd.get())), fd_(std::move(fd)) {
    raw_fd_ = fd_.get();
    tcp_store::AddOwnClient(endpoint_);
  }

  ~TcpStoreClient() override { Leave(); }

  // Says goodbye and closes the connection (see LeaveTcpStore).
  void Leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fd_.valid()) return;
    tcp_store::RemoveOwnClient(endpoint_);
    broken_ = "rendezvous: this process left the tcp store at " + address_;
    // A clean goodbye, so the server does not record this client as lost. Best effort and
    // non-blocking: a few bytes always fit in an idle socket's buffer.
    try {
      const Bytes bye = tcp_store::EncodeRequest({Op::kBye, {}, {}, 0});
      (void)::send(fd_.get(), bye.data(), bye.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } catch (...) {
    }
    ResetFd();
  }

  // Ends the connection from any thread, also while a call blocks in it (it shuts the socket
  // down, without the call's lock): that call and every later one throw PEER_LOST with `reason`.
  void Abandon(std::string reason) {
    std::lock_guard<std::mutex> lock(fd_mutex_);
    if (abandoned_.empty()) abandoned_ = std::move(reason);
    if (raw_fd_ >= 0) ::shutdown(raw_fd_, SHUT_RDWR);
  }

  void Set(const std::string& key, const Bytes& value) override {
    Call({Op::kSet, {key}, value, 0}, DeadlineAfter(kRequestTimeout), "Set", {key});
  }

  Bytes Get(const std::string& key, milliseconds timeout) override {
    Response response =
        Call({Op::kGet, {key}, {}, Clamp(timeout)}, WaitDeadline(timeout), "Get", {key});
    if (response.status == CHORUS_TIMEOUT) ThrowStoreTimeout(*this, {key}, timeout);
    return std::move(response.payload);
  }

  void Wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    const Response response =
        Call({Op::kWait, keys, {}, Clamp(timeout)}, WaitDeadline(timeout), "Wait", keys);
    if (response.status == CHORUS_TIMEOUT) ThrowStoreTimeout(*this, keys, timeout);
  }

  int64_t Add(const std::string& key, int64_t delta) override {
    const Response response =
        Call({Op::kAdd, {key}, {}, delta}, DeadlineAfter(kRequestTimeout), "Add", {key});
    return tcp_store::DecodeInt64(response.payload);
  }

  bool Check(const std::string& key) override {
    return Flag(Call({Op::kCheck, {key}, {}, 0}, DeadlineAfter(kRequestTimeout), "Check", {key}));
  }

  bool Remove(const std::string& key) override {
    return Flag(Call({Op::kRemove, {key}, {}, 0}, DeadlineAfter(kRequestTimeout), "Remove", {key}));
  }

  std::string Describe() const override { return "tcp store " + address_; }

  void Announce(const std::string& name) {
    Call({Op::kHello, {name, tcp_store::ThisProcess()}, {}, 0}, DeadlineAfter(kRequestTimeout),
         "Hello", {name});
  }

  tcp_store::HealthReport Health(milliseconds answer_within) {
    try {
      return tcp_store::DecodeHealthReport(
          Call({Op::kHealth, {}, {}, 0}, DeadlineAfter(answer_within), "Health", {}).payload);
    } catch (const Error& e) {
      // Call words every failed exchange as PEER_LOST; a health check must tell a server that
      // went away from one that stopped answering.
      if (e.status() == CHORUS_PEER_LOST && timed_out_) throw Error(CHORUS_TIMEOUT, e.what());
      throw;
    }
  }

 private:
  static int64_t Clamp(milliseconds timeout) { return std::max<int64_t>(timeout.count(), 0); }

  static Clock::time_point WaitDeadline(milliseconds timeout) {
    if (timeout > milliseconds::max() - kWaitGrace) return Clock::time_point::max();
    return DeadlineAfter(std::max(timeout, milliseconds(0)) + kWaitGrace);
  }

  static bool Flag(const Response& response) {
    return !response.payload.empty() && response.payload[0] != 0;
  }

  // Sends `request` and returns the server's response: OK, or TIMEOUT for a wait. Any other
  // status is thrown. A failed exchange closes the connection, since a late answer would pair
  // with the next request, and throws PEER_LOST.
  Response Call(const Request& request, Clock::time_point deadline, const char* what,
                const std::vector<std::string>& keys) {
    const Bytes frame = tcp_store::EncodeRequest(request);
    const std::string during = std::string(" (during ") + what + " of " + Quoted(keys) + ")";
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fd_.valid()) throw Error(CHORUS_PEER_LOST, broken_ + during);

    int err = 0;
    IoResult result = SendAll(fd_.get(), frame.data(), frame.size(), deadline, &err);
    uint8_t header[tcp_store::kFrameHeaderBytes];
    if (result == IoResult::kOk)
      result = RecvAll(fd_.get(), header, sizeof(header), deadline, &err);
    Response response;
    if (result == IoResult::kOk) {
      uint32_t length = 0;
      Bytes body;
      try {
        length = tcp_store::DecodeFrameLength(header);
        body.resize(length);
        // The server has answered: its body (a 64 MiB value, say, behind a busy server on two
        // cores) may take longer than a short wait's grace to arrive, and is bounded as a request.
        const Clock::time_point body_deadline = std::max(deadline, DeadlineAfter(kRequestTimeout));
        result = RecvAll(fd_.get(), body.data(), length, body_deadline, &err);
        if (result == IoResult::kOk) response = tcp_store::DecodeResponse(body.data(), length);
      } catch (const Error& e) {
        Break(std::string("rendezvous: the tcp store at ") + address_ + " sent " + e.what());
        throw Error(CHORUS_INTERNAL, broken_ + during);
      }
    }
    if (result != IoResult::kOk) {
      Break(Failure(result, err));
      timed_out_ = result == IoResult::kTimedOut;
      throw Error(CHORUS_PEER_LOST, broken_ + during);
    }
    if (response.status != CHORUS_OK && response.status != CHORUS_TIMEOUT) {
      throw Error(response.status, ToString(response.payload));
    }
    return response;
  }

  std::string Failure(IoResult result, int err) const {
    const std::string leader = " (the leader, " + address_ + ", may have exited)";
    switch (result) {
      case IoResult::kClosed:
        return "rendezvous: the rendezvous store at " + address_ + " closed the connection" +
               leader;
      case IoResult::kTimedOut:
        return "rendezvous: the rendezvous store at " + address_ +
               " did not answer in time, so the connection was dropped (the leader, " + address_ +
               ", may be hung or unreachable)";
      default:
        return "rendezvous: the connection to the rendezvous store at " + address_ +
               " failed: " + ErrnoText(err) + leader;
    }
  }

  // Closes the connection; every later request throws PEER_LOST with `reason` (or with why the
  // connection was abandoned, when it was).
  void Break(std::string reason) {
    {
      std::lock_guard<std::mutex> lock(fd_mutex_);
      broken_ = abandoned_.empty() ? std::move(reason) : abandoned_;
    }
    if (fd_.valid()) tcp_store::RemoveOwnClient(endpoint_);
    ResetFd();
  }

  // Closes the socket; Abandon no longer reaches it (its number may be reused at once).
  void ResetFd() {
    std::lock_guard<std::mutex> lock(fd_mutex_);
    raw_fd_ = -1;
    fd_.reset();
  }

  const std::string address_;
  const std::string endpoint_;  // this end of the connection, for a server in this process
  std::mutex mutex_;
  UniqueFd fd_;             // invalid once broken
  std::string broken_;      // why the connection was closed
  bool timed_out_ = false;  // it was closed because the server did not answer in time
  std::mutex fd_mutex_;     // guards raw_fd_ and abandoned_; taken without mutex_ by Abandon
  int raw_fd_ = -1;         // fd_'s number while it is open
  std::string abandoned_;   // why Abandon ended the connection
};

// Reads one frame's body of at most `max_body` bytes. Throws with `what` in the message.
Bytes ReadFrame(int fd, const std::string& address, uint32_t max_body, Clock::time_point deadline,
                const std::string& what) {
  uint8_t header[tcp_store::kFrameHeaderBytes];
  int err = 0;
  IoResult result = RecvAll(fd, header, sizeof header, deadline, &err);
  Bytes body;
  if (result == IoResult::kOk) {
    uint32_t length = 0;
    for (uint8_t byte : header) length = (length << 8) | byte;
    if (length > max_body) {
      throw Error(CHORUS_UNAVAILABLE,
                  "rendezvous: " + address + " answered, but not as a chorus rendezvous store (" +
                      what + " of " + std::to_string(length) +
                      " bytes): is another program on the leader's port? give the job a free "
                      "port in TF_CONFIG (or the launcher's --port)");
    }
    body.resize(length);
    result = RecvAll(fd, body.data(), length, deadline, &err);
  }
  if (result == IoResult::kOk) return body;
  const std::string why = result == IoResult::kTimedOut ? "sent nothing in time"
                          : result == IoResult::kClosed ? "closed it"
                                                        : "failed: " + ErrnoText(err);
  throw Error(result == IoResult::kTimedOut ? CHORUS_TIMEOUT : CHORUS_UNAVAILABLE,
              "rendezvous: " + address + " accepted the connection but " + why + " (waiting for " +
                  what + "): is the leader stopped, or another program on its port?");
}

// The admission handshake (tcp_store_protocol.h): reads the greeting, and with a job secret
// proves this process holds it and checks that the store holds it too.
void JoinStore(int fd, const std::string& address, Clock::time_point deadline) {
  const Bytes greeting_frame =
      ReadFrame(fd, address, tcp_store::kMaxAdmissionBodyBytes, deadline, "a greeting");
  const std::optional<tcp_store::Greeting> greeting =
      tcp_store::DecodeGreeting(greeting_frame.data(), greeting_frame.size());
  if (!greeting) {
    throw Error(CHORUS_UNAVAILABLE,
                "rendezvous: " + address +
                    " answered, but not as a chorus rendezvous store: is another program on the "
                    "leader's port? give the job a free port in TF_CONFIG (or the launcher's "
                    "--port)");
  }
  const JobSecret secret = JobSecret::FromEnvironment();
  if (greeting->secret_required && !secret.present()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "rendezvous: the store at " + address +
                                             " admits only holders of the job's secret, and this "
                                             "process has none: " +
                                             kJobSecretHint);
  }
  if (!greeting->secret_required) {
    if (secret.present()) {
      // A store without the secret cannot prove it is this job's: refuse to talk to it.
      throw Error(CHORUS_INVALID_ARGUMENT, "rendezvous: this process has a job secret (" +
                                               secret.source() + ") but the store at " + address +
                                               " runs without one: " + kJobSecretHint);
    }
    return;
  }
  if (greeting->challenge.size() != JobSecret::kChallengeBytes) {
    throw Error(CHORUS_UNAVAILABLE, "rendezvous: the store at " + address +
                                        " sent a malformed greeting (a challenge of " +
                                        std::to_string(greeting->challenge.size()) + " bytes)");
  }
  const std::string challenge = JobSecret::Challenge();
  const Digest256 proof = secret.Prove(tcp_store::kClientRole, {greeting->challenge, challenge});
  const Bytes request =
      tcp_store::EncodeRequest({Op::kAuth, {challenge}, Bytes(proof.begin(), proof.end()), 0});
  int err = 0;
  if (SendAll(fd, request.data(), request.size(), deadline, &err) != IoResult::kOk) {
    throw Error(CHORUS_UNAVAILABLE,
                "rendezvous: could not send this process's proof of the job "
                "secret to the store at " +
                    address);
  }
  const Bytes answer_frame =
      ReadFrame(fd, address, tcp_store::kMaxAdmissionBodyBytes, deadline, "an answer to its proof");
  Response answer;
  try {
    answer = tcp_store::DecodeResponse(answer_frame.data(), answer_frame.size());
  } catch (const Error&) {
    throw Error(CHORUS_UNAVAILABLE,
                "rendezvous: the store at " + address + " sent a malformed answer to the proof");
  }
  if (answer.status != CHORUS_OK) {
    throw Error(answer.status, "rendezvous: " + ToString(answer.payload));
  }
  if (answer.payload.size() != JobSecret::kProofBytes ||
      !secret.Verify(answer.payload.data(), tcp_store::kServerRole,
                     {greeting->challenge, challenge})) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "rendezvous: the store at " + address +
                    " does not hold this job's secret (another job's leader on that port?): " +
                    kJobSecretHint);
  }
}

}  // namespace

std::shared_ptr<KvStore> ConnectTcpStore(const std::string& host, uint16_t port,
                                         milliseconds timeout) {
  const std::string address = JoinHostPort(host, port);
  const Clock::time_point deadline = DeadlineAfter(timeout);
  std::string error;
  for (int attempt = 0;; ++attempt) {
    UniqueFd fd = ConnectTcp(host, port, deadline, &error);
    if (fd.valid()) {
      JoinStore(fd.get(), address, deadline);
      if (attempt > 0)
        Log().debug("rendezvous: connected to {} after {} retries", address, attempt);
      return std::make_shared<TcpStoreClient>(address, std::move(fd));
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    // The leader may not listen yet: try again soon, 50 ms at first, then every 100 ms.
    const milliseconds pause(attempt < 4 ? 50 : 100);
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, left));
  }
  throw Error(CHORUS_TIMEOUT, "rendezvous: could not connect to the tcp store at " + address +
                                  " within " + std::to_string(timeout.count()) +
                                  " ms (last error: " + error +
                                  "); is the leader (worker 0 or the chief) started and serving "
                                  "there? raise CHORUS_TIMEOUT_SECONDS if it starts slowly");
}

namespace {

TcpStoreClient& ClientOf(KvStore& store, const char* what) {
  auto* client = dynamic_cast<TcpStoreClient*>(&store);
  if (client == nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                std::string(what) + ": the store given (" + store.Describe() +
                    ") is not a connection ConnectTcpStore returned (a WithPrefix view of one is "
                    "not either)");
  }
  return *client;
}

}  // namespace

tcp_store::HealthReport tcp_store::ReadHealth(KvStore& store, milliseconds answer_within) {
  return ClientOf(store, "ReadHealth").Health(answer_within);
}

void LeaveTcpStore(KvStore& store) { ClientOf(store, "LeaveTcpStore").Leave(); }

void AbandonTcpStore(KvStore& store, const std::string& reason) {
  ClientOf(store, "AbandonTcpStore").Abandon(reason);
}

void AnnounceTcpStoreClient(KvStore& store, const std::string& name) {
  TcpStoreClient* client = &ClientOf(store, "AnnounceTcpStoreClient");
  if (name.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "AnnounceTcpStoreClient: the name is empty");
  }
  client->Announce(name);
}

}  // namespace chorus
