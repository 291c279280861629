#include "ucx_endpoint.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

#include "tag_layout.h"

namespace chorus::ucx {
namespace {

using Clock = std::chrono::steady_clock;
using sdk::Fail;

// Beyond this a time-out counts as "no limit" (and would overflow the clock).
constexpr int64_t kForeverMs = int64_t{1} << 40;
// A sleeping wait wakes at least this often to look at the abort flag and its peer.
constexpr int64_t kSleepSliceMs = 50;
// How often a wait looks at its peer's "closed" key and process.
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(100);
// How long destroy lets the endpoints flush and close before it tears the worker down.
constexpr int64_t kCloseMs = 2000;
// How long after a caller last progressed the worker the progress thread still stands back: a
// caller between two waits of a loop is about to progress again.
constexpr auto kHandOver = sdk::CallerHandOver::kHandOver;

Clock::time_point DeadlineAfter(int64_t timeout_ms) {
  return Clock::now() +
         std::chrono::milliseconds(timeout_ms < 0 ? kForeverMs : std::min(timeout_ms, kForeverMs));
}

int64_t MillisecondsUntil(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max<int64_t>(0, left.count());
}

std::string Transfer(const Request& r) {
  return std::string(r.receive ? "receive from" : "send to") + " rank " + std::to_string(r.peer) +
         " (tag " + std::to_string(r.tag) + ", " + std::to_string(r.bytes) + " bytes)";
}

// Whether UCX refused UCP_ERR_HANDLING_MODE_PEER to a peer on this host under `settings` (the
// UCX_TLS this process's endpoints use); `refused` records that it did.
bool PeerModeRefused(const std::string& settings, bool refused) {
  static std::mutex mutex;
  static std::set<std::string> refused_settings;
  std::lock_guard<std::mutex> lock(mutex);
  if (refused) refused_settings.insert(settings);
  return refused_settings.count(settings) != 0;
}

// Logs `message` at `level` the first time this process asks (one line per job, not per
// endpoint).
void LogOnce(chorus_log_level level, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!logged.insert(message).second) return;
  }
  sdk::Log(level, message);
}

}  // namespace

// ---- Set-up -----------------------------------------------------------------------------------

Endpoint::Endpoint(const chorus_transport_create_args& args, const EndpointOptions& options)
    : rank_(args.rank),
      size_(args.size),
      store_(args.store),
      options_(options),
      host_id_(sdk::CreateHostId(args)) {
  const Clock::time_point deadline = DeadlineAfter(args.timeout_ms);
  try {
    ucp_config_t* config = ReadConfig(options_);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = static_cast<size_t>(size_);
    const ucs_status_t initialised = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (initialised != UCS_OK) {
      context_ = nullptr;
      Fail(CHORUS_UNAVAILABLE,
           "ucx: UCX could not start (ucp_init: ", ucs_status_string(initialised), ") with ",
           DescribeTransportSettings(options_),
           "; set UCX_TLS (or the option tls) to transports `ucx_info -d` lists here, e.g. tcp");
    }
    ucp_worker_params_t worker{};
    worker.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
    worker.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // every call is made under mutex_
    worker.events = UCP_WAKEUP_TAG_SEND | UCP_WAKEUP_TAG_RECV;
    const ucs_status_t created = ucp_worker_create(context_, &worker, &worker_);
    if (created != UCS_OK) {
      worker_ = nullptr;
      Fail(CHORUS_UNAVAILABLE,
           "ucx: UCX could not open a worker (ucp_worker_create: ", ucs_status_string(created),
           ") with ", DescribeTransportSettings(options_),
           "; set UCX_TLS (or the option tls) to transports `ucx_info -d` lists here, e.g. tcp");
    }
    // Without an event fd (a transport without wake-up support) the progress thread polls in
    // short sleeps.
    if (ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) event_fd_ = -1;
    progress_thread_ = std::thread([this] { ProgressLoop(); });
    Connect(MillisecondsUntil(deadline));
  } catch (...) {
    StopProgressThread();
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
    // Every handshake request was freed on the way out; those UCX still held are deleted here.
    for (Request* r : LiveLocked([](const Request& q) { return q.freed; })) DeleteLocked(*r);
    throw;
  }
}

std::string Endpoint::Key(const std::string& what, int32_t rank) const {
  return options_.store_prefix + "ucx/" + what + "/" + std::to_string(rank);
}

void Endpoint::Connect(int64_t timeout_ms) {
  const Clock::time_point deadline = DeadlineAfter(timeout_ms);
  ucp_address_t* address = nullptr;
  size_t length = 0;
  const ucs_status_t got = ucp_worker_get_address(worker_, &address, &length);
  if (got != UCS_OK) {
    Fail(CHORUS_INTERNAL, "ucx: ucp_worker_get_address failed: ", ucs_status_string(got));
  }
  PeerRecord mine;
  mine.process = ThisProcess();
  mine.host_id = host_id_;
  mine.worker_address.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  store_.Set(Key("addr", rank_), EncodeRecord(mine));

  std::string without_peer_mode_refused;
  same_host_without_peer_mode_ = SameHostWithoutPeerMode(&without_peer_mode_refused);
  peers_.resize(static_cast<size_t>(size_));
  for (int32_t p = 0; p < size_; ++p) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    peer.owner = this;
    peer.rank = p;
    const PeerRecord record =
        p == rank_ ? mine
                   : DecodeRecord(store_.GetUnlessAborted(Key("addr", p),
                                                          MillisecondsUntil(deadline), &aborted_),
                                  p);
    peer.process = record.process;
    peer.same_machine = record.process.host == mine.process.host;
    peer.same_host = peer.same_machine && record.host_id == mine.host_id;
    ConnectPeer(peer, record);
  }
  // More ranks on this host than cpus this process may run on: waits yield, never spin.
  const auto here = std::count_if(peers_.begin(), peers_.end(),
                                  [](const Peer& peer) { return peer.same_machine; });
  oversubscribed_ = sdk::MoreRanksThanCpus(here);
  if (here > 1 && !without_peer_mode_refused.empty()) {
    LogOnce(CHORUS_LOG_INFO, "ucx: same_host=shared_memory, but " + without_peer_mode_refused +
                                 ": peers on this host are connected with UCX's peer failure "
                                 "handling (tcp or RDMA loopback), as with same_host=peer_failure");
  }
  Handshake(deadline);
}

bool Endpoint::SameHostWithoutPeerMode(std::string* why) const {
  // Shared memory and loopback alone: UCX refuses peer failure handling to this host's peers.
  if (SharedMemoryOnly(options_)) return true;
  if (options_.same_host == SameHostMode::kPeerFailure) return false;
  const ResourceQuery& query = ProcessResources();
  if (query.error.has_value()) {
    *why = "UCT's resource query failed (" + *query.error + ")";
    return false;
  }
  if (SharedMemoryCarriesAlone(EnabledResources(query.resources, SelectionOf(options_)))) {
    return true;
  }
  *why = "with " + DescribeTransportSettings(options_) +
         " UCX has no shared-memory transport that carries their messages without tcp (posix, "
         "sysv or xpmem, and beside tcp cma or knem)";
  return false;
}

// One message each way between every pair, the lower rank first: UCX 1.13's tcp transport
// sometimes fails a connection that both ends open at once ("Endpoint timeout", or an assertion
// without PEER mode), so each pair connects one way, and the other way only after it. Also
// finishes UCX's wire-up before the first real message.
void Endpoint::Handshake(Clock::time_point deadline) {
  std::vector<uint8_t> hello(static_cast<size_t>(size_), 0);
  const uint8_t mine = 1;
  std::vector<Request*> requests(static_cast<size_t>(size_), nullptr), sends;
  auto wait = [&](Request* r, const char* what) {
    if (!Wait(*r, MillisecondsUntil(deadline))) {
      Fail(CHORUS_TIMEOUT, "ucx create: rank ", r->peer, " did not ", what,
           " the connection handshake of rank ", rank_, " in time (is every rank started?)");
    }
    if (r->status != CHORUS_OK && r->status != CHORUS_PEER_LOST) Fail(r->status, r->message);
  };
  std::vector<std::unique_ptr<Request, std::function<void(Request*)>>> owned;
  auto own = [&](Request* r) {
    owned.emplace_back(r, [this](Request* q) { Free(q); });
    return r;
  };
  for (int32_t p = 0; p < size_; ++p) {
    if (p == rank_ || peers_[static_cast<size_t>(p)].lost) continue;
    requests[static_cast<size_t>(p)] =
        own(Start(true, p, 0, &hello[static_cast<size_t>(p)], 1, ControlTag(p)));
    if (p > rank_)
      sends.push_back(own(Start(false, p, 0, const_cast<uint8_t*>(&mine), 1, ControlTag(rank_))));
  }
  for (int32_t p = 0; p < size_; ++p) {
    Request* r = requests[static_cast<size_t>(p)];
    if (r == nullptr) continue;
    wait(r, "answer");
    if (p < rank_ && r->status == CHORUS_OK) {
      sends.push_back(own(Start(false, p, 0, const_cast<uint8_t*>(&mine), 1, ControlTag(rank_))));
    }
  }
  for (Request* r : sends) wait(r, "accept");
}

void Endpoint::ConnectPeer(Peer& peer, const PeerRecord& record) {
  ucp_ep_params_t params{};
  params.address = reinterpret_cast<const ucp_address_t*>(record.worker_address.data());
  // The error handler is installed in either mode: without PEER mode UCX still calls it where a
  // transport fails on the peer (UCX 1.13's cma, reading a dead peer's memory for a large
  // message), instead of aborting the process for want of one.
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.err_handler.cb = OnPeerError;
  params.err_handler.arg = &peer;
  const auto peer_mode = [&](bool on) {
    params.err_mode = on ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    peer.peer_mode = on;
  };
  // A peer on this host goes without UCX's peer failure handling (PEER mode) where
  // SameHostWithoutPeerMode said (same_host=shared_memory and transports that carry it over
  // shared memory alone, or shared memory alone, where UCX refuses PEER mode: "no peer failure
  // handler"), and where UCX refused it before under the same settings (remembered, so that UCX
  // logs its refusal once per process); its death is then noticed through its process and its
  // "closed" key (CheckPeer). Never tcp without it: UCX 1.13's tcp asserts on a refused
  // connection without PEER mode.
  const std::string settings = DescribeTransportSettings(options_);
  peer_mode(!peer.same_host || !(same_host_without_peer_mode_ || PeerModeRefused(settings, false)));
  std::lock_guard<std::mutex> lock(mutex_);
  ucs_status_t status = ucp_ep_create(worker_, &params, &peer.ep);
  // The check that UCX did not put tcp under it after all (a UCX that chooses unlike 1.13).
  const bool tcp_without_peer_mode = status == UCS_OK && !peer.peer_mode && LanesUseTcp(peer.ep);
  if (tcp_without_peer_mode) {
    LogOnce(CHORUS_LOG_WARN, "ucx: with " + settings +
                                 " UCX carries a peer on this host over tcp as well as shared "
                                 "memory; connecting such peers with UCX's peer failure handling");
    DiscardEndpointLocked(std::exchange(peer.ep, nullptr));
    peer_mode(true);
    status = ucp_ep_create(worker_, &params, &peer.ep);
  }
  // A peer on this machine that UCX reaches by shared memory alone (PEER mode refused), also one
  // the job counts as on another host: without PEER mode, watched through its process.
  if (status != UCS_OK && peer.same_machine && peer.peer_mode && !tcp_without_peer_mode) {
    peer_mode(false);
    status = ucp_ep_create(worker_, &params, &peer.ep);
    if (status == UCS_OK) PeerModeRefused(settings, true);
  }
  if (status != UCS_OK) {
    peer.ep = nullptr;
    // A rank may create, finish and destroy its endpoint before a slower rank connects to it:
    // then that peer is lost (its operations fail), not the whole endpoint.
    if (PeerGoneLocked(peer)) {
      MarkPeerLostLocked(peer, "rank " + std::to_string(peer.rank) +
                                   " had closed its endpoint before rank " + std::to_string(rank_) +
                                   " connected to it (" + ucs_status_string(status) + ")");
      return;
    }
    Fail(CHORUS_UNAVAILABLE, "ucx: UCX finds no transport from rank ", rank_, " to rank ",
         peer.rank, peer.same_host ? " on this host" : " on another host",
         " (ucp_ep_create: ", ucs_status_string(status), ") with ",
         DescribeTransportSettings(options_),
         "; set UCX_TLS (or the option tls) to transports `ucx_info -d` lists on both hosts, "
         "e.g. tcp, and UCX_NET_DEVICES to an interface both reach");
  }
}

void Endpoint::DiscardEndpointLocked(ucp_ep_h ep) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* request = ucp_ep_close_nbx(ep, &param);
  if (!UCS_PTR_IS_PTR(request)) return;
  const Clock::time_point deadline = DeadlineAfter(1000);
  while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline) {
    ucp_worker_progress(worker_);
  }
  ucp_request_free(request);  // UCX finishes it alone if it is still in progress
}

// ---- Tear-down --------------------------------------------------------------------------------

void Endpoint::CloseEndpointsLocked(bool force, std::vector<void*>& closing) {
  for (Peer& peer : peers_) {
    if (peer.ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A failed endpoint (and one without error handling being torn down) closes by force.
    param.flags = (force || peer.lost) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* request = ucp_ep_close_nbx(std::exchange(peer.ep, nullptr), &param);
    if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
  }
}

void Endpoint::WaitForCloses(std::vector<void*>& closing, Clock::time_point deadline) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ProgressLocked();
      std::erase_if(closing, [](void* request) {
        if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
        ucp_request_free(request);
        return true;
      });
      if (closing.empty() || Clock::now() >= deadline) {
        for (void* request : closing) ucp_request_free(request);  // UCX finishes them alone
        closing.clear();
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Endpoint::PublishClosed() {
  if (closed_published_.exchange(true)) return;
  try {
    store_.Set(Key("closed", rank_), "1");
  } catch (...) {  // a store that is gone: the peers notice through UCX or time out
  }
}

size_t Endpoint::CallbacksDueLocked() const {
  size_t due = 0;
  for (const Request* r = live_; r != nullptr; r = r->live_next) {
    if (r->ucx != nullptr && (r->receive || peers_[static_cast<size_t>(r->peer)].peer_mode)) ++due;
  }
  return due;
}

bool Endpoint::ProgressThreadStandsBackLocked() const {
  if (spinning_.load(std::memory_order_relaxed) > 0) return true;
  if (sleeping_.load() > 0) return false;
  return caller_progressed_.Recent();
}

void Endpoint::ProgressLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (ProgressThreadStandsBackLocked()) {
      progress_idle_.wait_for(lock, kHandOver);
      continue;
    }
    ProgressLocked();
    if (event_fd_ >= 0 && ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;  // more to do
    lock.unlock();
    if (event_fd_ >= 0) {
      pollfd fd{event_fd_, POLLIN, 0};
      poll(&fd, 1, static_cast<int>(kSleepSliceMs));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    lock.lock();
  }
}

void Endpoint::StopProgressThread() {
  if (!progress_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    progress_idle_.notify_all();
  }
  if (event_fd_ >= 0) ucp_worker_signal(worker_);
  progress_thread_.join();
}

Endpoint::~Endpoint() {
  StopProgressThread();  // destroy progresses the worker itself from here on
  const Clock::time_point deadline = DeadlineAfter(kCloseMs);
  std::vector<void*> closing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing.swap(closing_);
    // Flush what this rank sent before the peers hear it closed (abort closed them already).
    CloseEndpointsLocked(false, closing);
  }
  WaitForCloses(closing, deadline);
  PublishClosed();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Request* r : LiveLocked([](const Request& q) { return !q.done; })) {
      FinishLocked(*r, CHORUS_ABORTED,
                   "ucx: the endpoint of rank " + std::to_string(rank_) +
                       " was destroyed with this " + Transfer(*r) + " pending");
      CancelLocked(*r);
    }
  }
  // Cancelled receives and sends on closed endpoints call back while the worker progresses.
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ProgressLocked();
      if (CallbacksDueLocked() == 0) break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ucp_worker_destroy(worker_);  // releases what UCX still held
  ucp_cleanup(context_);
  for (Request* r : LiveLocked([](const Request&) { return true; })) {
    if (r->freed) {
      DeleteLocked(*r);
    } else {
      UnlinkLocked(*r);
      r->endpoint = nullptr;  // request_free still deletes it; waits answer its final status
      r->ucx = nullptr;
    }
  }
}

// ---- Operations -------------------------------------------------------------------------------

Request* Endpoint::Send(int32_t peer, uint64_t tag, const void* data, size_t bytes) {
  return Start(false, peer, tag, const_cast<void*>(data), bytes, UcpTag(rank_, tag, "ucx isend"));
}

Request* Endpoint::Receive(int32_t peer, uint64_t tag, void* data, size_t bytes) {
  return Start(true, peer, tag, data, bytes, UcpTag(peer, tag, "ucx irecv"));
}

Request* Endpoint::Start(bool receive, int32_t peer, uint64_t tag, void* data, size_t bytes,
                         uint64_t ucp_tag) {
  const char* what = receive ? "ucx irecv" : "ucx isend";
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Request> request = NewRequestLocked();
  // A failure below gives the request back to the spares.
  struct Spare {
    Endpoint* endpoint;
    std::unique_ptr<Request>& request;
    ~Spare() {
      if (request != nullptr) endpoint->RecycleLocked(std::move(request));
    }
  } spare{this, request};
  Request& r = *request;
  r.endpoint = this;
  r.receive = receive;
  r.peer = peer;
  r.tag = tag;
  r.bytes = bytes;

  if (aborted_) Fail(CHORUS_ABORTED, what, ": the endpoint of rank ", rank_, " was aborted");
  Peer& target = peers_[static_cast<size_t>(peer)];
  if (target.lost) {
    // A receive of a message the peer sent before it was lost still gets it.
    ucp_tag_recv_info_t info{};
    if (!receive || ucp_tag_probe_nb(worker_, ucp_tag, kFullMask, 0, &info) == nullptr) {
      Fail(CHORUS_PEER_LOST, what, ": ", target.lost_reason);
    }
  }
  if (!receive && target.ep == nullptr) {
    Fail(CHORUS_ABORTED, what, ": the endpoint of rank ", rank_, " is closing");
  }
  ucp_request_param_t param{};
  // A send may complete in place (a small message copied out at once: no UCX request, no
  // callback, one progress less). A receive always reports through its callback, which says how
  // many bytes came.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  if (receive) param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.user_data = &r;
  // The callback may run inside the call (a message that is already here), so the request is
  // registered first.
  LinkLocked(r);
  ++in_ucx_;
  ucs_status_ptr_t started;
  if (receive) {
    param.cb.recv = OnReceiveDone;
    started = ucp_tag_recv_nbx(worker_, data, bytes, ucp_tag, kFullMask, &param);
  } else {
    param.cb.send = OnSendDone;
    started = ucp_tag_send_nbx(target.ep, data, bytes, ucp_tag, &param);
  }
  if (UCS_PTR_IS_ERR(started)) {
    UnlinkLocked(r);
    --in_ucx_;
    Fail(receive ? CHORUS_INTERNAL : CHORUS_PEER_LOST, what, ": UCX refused the ", Transfer(r),
         ": ", ucs_status_string(UCS_PTR_STATUS(started)));
  }
  if (started == nullptr) {  // completed in place after all
    --in_ucx_;
    r.ucx_done = true;
    if (!r.done) FinishLocked(r, CHORUS_OK, "");
  } else if (!r.ucx_done) {
    r.ucx = started;
  }
  return request.release();
}

void Endpoint::LinkLocked(Request& r) {
  r.live_prev = nullptr;
  r.live_next = live_;
  if (live_ != nullptr) live_->live_prev = &r;
  live_ = &r;
}

void Endpoint::UnlinkLocked(Request& r) {
  if (r.live_prev != nullptr) r.live_prev->live_next = r.live_next;
  if (r.live_next != nullptr) r.live_next->live_prev = r.live_prev;
  if (live_ == &r) live_ = r.live_next;
  r.live_prev = r.live_next = nullptr;
}

std::unique_ptr<Request> Endpoint::NewRequestLocked() {
  if (spare_.empty()) return std::make_unique<Request>();
  std::unique_ptr<Request> r = std::move(spare_.back());
  spare_.pop_back();
  return r;
}

void Endpoint::RecycleLocked(std::unique_ptr<Request> r) {
  if (spare_.size() >= kSpareRequests) return;  // deleted
  // Field by field: a fresh Request{} assigned over it cost 6% of a small ping-pong's cycles.
  // Start sets the fields not reset here (receive, peer, tag, bytes) on every use.
  r->endpoint = nullptr;
  r->ucx = nullptr;
  r->done.store(false, std::memory_order_relaxed);
  r->freed = r->ucx_done = false;
  r->status = CHORUS_OK;
  r->message.clear();
  r->live_prev = r->live_next = nullptr;
  spare_.push_back(std::move(r));
}

void Endpoint::DeleteLocked(Request& r) {
  UnlinkLocked(r);
  RecycleLocked(std::unique_ptr<Request>(&r));
}

template <typename Predicate>
std::vector<Request*> Endpoint::LiveLocked(Predicate keep) const {
  std::vector<Request*> selected;
  for (Request* r = live_; r != nullptr; r = r->live_next) {
    if (keep(*r)) selected.push_back(r);
  }
  return selected;
}

unsigned Endpoint::ProgressLocked(bool until_idle) {
  unsigned events = 0;
  for (;;) {
    const unsigned now = ucp_worker_progress(worker_);
    events += now;
    if (now == 0 || !until_idle) break;
  }
  // A peer's failure counts once everything it sent before is matched: a peer that sent its
  // messages and then closed its endpoint has not lost them.
  if (!peer_errors_) return events;
  peer_errors_ = false;
  for (Peer& peer : peers_) {
    if (!peer.ucx_error.empty()) MarkPeerLostLocked(peer, std::exchange(peer.ucx_error, ""));
  }
  return events;
}

void Endpoint::FinishLocked(Request& r, chorus_status status, std::string message) {
  if (r.done) return;
  r.status = status;
  r.message = std::move(message);
  r.done.store(true, std::memory_order_release);
  if (sleeping_.load() > 0) finished_.notify_all();
  if (efd_sleepers_.load() > 0) ucp_worker_signal(worker_);
}

void Endpoint::CancelLocked(Request& r) {
  if (r.ucx != nullptr && r.receive) ucp_request_cancel(worker_, r.ucx);
}

void Endpoint::MarkPeerLostLocked(Peer& peer, const std::string& reason) {
  if (peer.lost) return;
  peer.lost = true;
  peer.lost_reason = reason;
  for (Request* r : LiveLocked([&](const Request& q) { return !q.done && q.peer == peer.rank; })) {
    FinishLocked(*r, CHORUS_PEER_LOST, "ucx: the " + Transfer(*r) + " failed: " + reason);
    CancelLocked(*r);  // a send ends through UCX's error handling, or at destroy
  }
}

// ---- UCX callbacks (run inside ucp_worker_progress, under mutex_) ------------------------------

void Endpoint::OnSendDone(void* ucx, ucs_status_t status, void* user_data) {
  ucp_request_free(ucx);
  auto* r = static_cast<Request*>(user_data);
  r->endpoint->UcxDoneLocked(*r, status, r->bytes);
}

void Endpoint::OnReceiveDone(void* ucx, ucs_status_t status, const ucp_tag_recv_info_t* info,
                             void* user_data) {
  ucp_request_free(ucx);
  auto* r = static_cast<Request*>(user_data);
  r->endpoint->UcxDoneLocked(*r, status, info != nullptr ? info->length : 0);
}

void Endpoint::UcxDoneLocked(Request& r, ucs_status_t status, size_t received) {
  --in_ucx_;
  r.ucx = nullptr;
  r.ucx_done = true;
  if (status == UCS_OK && (!r.receive || received == r.bytes)) {  // the common case, first
    FinishLocked(r, CHORUS_OK, "");
    if (r.freed) DeleteLocked(r);
    return;
  }
  const std::string sizes = "rank " + std::to_string(r.peer) + " sent " +
                            (status == UCS_ERR_MESSAGE_TRUNCATED && received <= r.bytes
                                 ? "more than " + std::to_string(r.bytes)
                                 : std::to_string(received)) +
                            " bytes with tag " + std::to_string(r.tag) + ", but rank " +
                            std::to_string(rank_) + " receives exactly " + std::to_string(r.bytes) +
                            " (a receive must name the byte count the sender sends)";
  if (status == UCS_OK && r.receive && received != r.bytes) {
    FinishLocked(r, CHORUS_INVALID_ARGUMENT, "ucx: " + sizes);
  } else if (status == UCS_OK) {
    FinishLocked(r, CHORUS_OK, "");
  } else if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    FinishLocked(r, CHORUS_INVALID_ARGUMENT, "ucx: " + sizes);
  } else if (aborted_) {
    FinishLocked(r, CHORUS_ABORTED,
                 "ucx: the endpoint of rank " + std::to_string(rank_) + " was aborted during the " +
                     Transfer(r));
  } else {
    FinishLocked(
        r, CHORUS_PEER_LOST,
        "ucx: the " + Transfer(r) + " failed: UCX says \"" + ucs_status_string(status) + "\"");
  }
  if (r.freed) DeleteLocked(r);
}

void Endpoint::OnPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  peer->owner->peer_errors_ = true;
  peer->ucx_error = std::string(
      "UCX reported \"" + std::string(ucs_status_string(status)) +
      "\" on the connection from rank " + std::to_string(peer->owner->rank_) + " to rank " +
      std::to_string(peer->rank) + " (its process died or it closed its endpoint)");
}

// ---- Waiting ----------------------------------------------------------------------------------

bool Endpoint::PeerGoneLocked(const Peer& peer) {
  if (peer.same_machine && !ProcessAlive(peer.process)) return true;
  try {
    return store_.Contains(Key("closed", peer.rank));
  } catch (...) {
    return false;
  }
}

// Looks at whether rank `rank` closed its endpoint or its process exited (called when its
// peer check is due).
void Endpoint::CheckPeer(int32_t rank) {
  const Peer& peer = peers_[static_cast<size_t>(rank)];
  const bool exited = peer.same_machine && !ProcessAlive(peer.process);
  bool closed = false;
  try {
    closed = !exited && store_.Contains(Key("closed", rank));
  } catch (...) {  // the store's own failure: the wait's time-out still ends it
  }
  if (!exited && !closed) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ProgressLocked();  // what the peer flushed before it closed is matched first
  MarkPeerLostLocked(
      peers_[static_cast<size_t>(rank)],
      exited ? "the process of rank " + std::to_string(rank) + " (pid " +
                   std::to_string(peer.process.pid) + " on this host) exited"
             : "rank " + std::to_string(rank) + " closed its endpoint (destroy or abort)");
}

bool Endpoint::Test(Request& r) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ProgressLocked();
    if (r.done) return true;
  }
  return CheckAfterProgress(r, Clock::now());
}

bool Endpoint::CheckAfterProgress(Request& r, Clock::time_point now) {
  caller_progressed_.Mark(now);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (r.done) return true;
    if (r.peer == rank_) return false;
    Peer& peer = peers_[static_cast<size_t>(r.peer)];
    if (peer.lost || now < peer.next_check) return false;
    peer.next_check = now + kPeerCheckInterval;
  }
  CheckPeer(r.peer);
  std::lock_guard<std::mutex> lock(mutex_);
  return r.done;
}

namespace {

// Counts a wait among those spinning on the worker, until End() or the end of its scope.
class SpinningWait {
 public:
  SpinningWait(std::atomic<int>& spinning, std::function<void()> on_last)
      : spinning_(spinning), on_last_(std::move(on_last)) {
    spinning_.fetch_add(1);
  }
  ~SpinningWait() { End(); }
  SpinningWait(const SpinningWait&) = delete;
  SpinningWait& operator=(const SpinningWait&) = delete;
  void End() {
    if (ended_) return;
    ended_ = true;
    if (spinning_.fetch_sub(1) == 1) on_last_();
  }

 private:
  std::atomic<int>& spinning_;
  std::function<void()> on_last_;
  bool ended_ = false;
};

}  // namespace

bool Endpoint::Wait(Request& r, int64_t timeout_ms) {
  if (r.done.load(std::memory_order_acquire)) return true;  // a send done in place, say
  // Set at the first look at the clock: a request done within 16 spins reads it never.
  Clock::time_point deadline{}, spin_until{}, yield_until{};
  // The spin lasts while the worker moves: it ends spin_us after the last progress that did
  // something (a long message streaming in keeps the wait on the core; a silent peer does not).
  unsigned events = 0;
  // The last spinning wait to stop hands the worker to the progress thread when a wait sleeps.
  SpinningWait spinning(spinning_, [this] {
    if (sleeping_.load() == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    progress_idle_.notify_all();
  });
  for (uint32_t spins = 16;; spins += 16) {
    {
      // One progress per spin, as ucx_perftest: over tcp each is an epoll_wait system call, and a
      // request that finished (a send done in place) needs none. The lock is held for 16 spins:
      // taking it for each cost a ping-pong of 8 bytes a fifth of its cycles. Other threads wait
      // at most those 16 progresses.
      std::lock_guard<std::mutex> lock(mutex_);
      for (int spin = 0; spin < 16; ++spin) {
        if (r.done) return true;
        events += ProgressLocked(/*until_idle=*/false);
      }
      if (r.done) return true;
    }
    // The clock, the peer and the abort flag every 16th spin: reading the clock cost more than
    // progressing the worker.
    const Clock::time_point now = Clock::now();
    if (spins == 16) deadline = DeadlineAfter(timeout_ms);
    if (spins == 16 || events != 0) {
      // With more ranks than cpus a spinning wait holds the core the rank it waits for needs
      // (sleeping at once instead made ring@ucx 1.5-2x faster at 256 KiB-1 MiB with 4 ranks on 2
      // cores), and a sleeping one answers a time slice late: it yields from the start (against
      // sleeping, medians of six rounds: 2.4x faster at 64 KiB, 1.2x at 1 MiB).
      spin_until = now + std::chrono::microseconds(oversubscribed_ ? 0 : options_.spin_us);
      yield_until = spin_until + std::chrono::microseconds(options_.yield_us);
      events = 0;
    }
    if (CheckAfterProgress(r, now)) return true;
    if (sdk::HostAbortRequested()) {
      Abort();
      continue;  // the request is done now, ABORTED
    }
    if (now >= deadline) return false;
    if (now < spin_until) continue;
    if (now < yield_until) {
      sched_yield();
      continue;
    }
    if (event_fd_ >= 0) {
      // Sleep in poll() on the worker's event fd: the kernel wakes this wait itself when UCX has
      // something, with no hop through the progress thread (on a shared core each hop cost a
      // time slice). The wait still counts as spinning, so the progress thread stays back. A
      // completion by another thread and abort() signal the worker.
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (r.done) return true;
        ProgressLocked();
        if (r.done) return true;
        if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;  // more came meanwhile
        efd_sleepers_.fetch_add(1);
      }
      pollfd fd{event_fd_, POLLIN, 0};
      const int woken =
          poll(&fd, 1, static_cast<int>(std::min(MillisecondsUntil(deadline), kSleepSliceMs)));
      efd_sleepers_.fetch_sub(1);
      if (woken > 0) events = 1;  // spin again (from the next look at the clock)
      continue;
    }
    spinning.End();
    // Sleep until a completion (the progress thread's, another waiter's, abort's) or the slice
    // ends, to look at the peer and the abort flag again. The progress thread takes the worker.
    std::unique_lock<std::mutex> lock(mutex_);
    if (r.done) return true;
    sleeping_.fetch_add(1);
    progress_idle_.notify_all();
    finished_.wait_for(
        lock, std::chrono::milliseconds(std::min(MillisecondsUntil(deadline), kSleepSliceMs)));
    sleeping_.fetch_sub(1);
    if (r.done) return true;
  }
}

void Endpoint::Abort() {
  if (aborted_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Request* r : LiveLocked([](const Request& q) { return !q.done; })) {
      FinishLocked(*r, CHORUS_ABORTED,
                   "ucx: the endpoint of rank " + std::to_string(rank_) +
                       " was aborted during the " + Transfer(*r));
      CancelLocked(*r);
    }
    // Closing by force tells the peers (over tcp at once); their own waits see the closed key.
    CloseEndpointsLocked(true, closing_);
    caller_progressed_.Clear();  // the progress thread runs the closes now
    progress_idle_.notify_all();
  }
  if (event_fd_ >= 0) ucp_worker_signal(worker_);  // the progress thread runs the closes now
  PublishClosed();
}

void Endpoint::Free(Request* r) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!r->done) {  // freed while live: only after abort, by plugin.h; be safe otherwise too
    FinishLocked(*r, CHORUS_ABORTED, "ucx: request freed while pending");
    CancelLocked(*r);
  }
  if (r->ucx_done) {
    DeleteLocked(*r);
  } else {
    r->freed = true;  // UCX still writes into it; its callback (or destroy) deletes it
  }
}

}  // namespace chorus::ucx
