#include "p2p_engine.h"

#include <chorus/base/error.h>

#include <sstream>

namespace chorus::torch_backend {
namespace {

using Clock = std::chrono::steady_clock;

// How long the engine's thread waits on one request when nothing moved, before it looks at the
// others and at batches queued meanwhile: the most a newly started batch waits to be posted.
constexpr int64_t kWaitSliceMs = 1;

std::string Seconds(std::chrono::milliseconds ms) {
  std::ostringstream text;
  text << static_cast<double>(ms.count()) / 1000.0 << " s";
  return text.str();
}

}  // namespace

P2pEngine::P2pEngine(std::unique_ptr<CKvStore> store, std::unique_ptr<TransportEndpoint> endpoint,
                     std::vector<std::string> peer_names, std::chrono::milliseconds timeout)
    : store_(std::move(store)),
      endpoint_(std::move(endpoint)),
      plugin_(endpoint_->library().table()),
      peer_names_(std::move(peer_names)),
      timeout_(timeout),
      thread_([this] { Loop(); }) {}

P2pEngine::~P2pEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
  endpoint_.reset();  // before the store it publishes its address in
}

std::string P2pEngine::PeerName(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(peer_names_.size())) return peer_names_[rank];
  return "rank " + std::to_string(rank);
}

std::string P2pEngine::OpText(const P2pOp& op) const {
  return std::string(op.send ? "send of " : "receive of ") + std::to_string(op.bytes) + " bytes " +
         (op.send ? "to " : "from ") + PeerName(op.peer);
}

void P2pEngine::Start(std::string what, std::vector<P2pOp> ops, Done done,
                      std::chrono::milliseconds timeout) {
  Batch batch;
  batch.what = std::move(what);
  batch.ops = std::move(ops);
  batch.done = std::move(done);
  batch.timeout = timeout.count() > 0 ? timeout : timeout_;
  batch.deadline = Clock::now() + batch.timeout;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(batch));
  }
  ready_.notify_one();
}

void P2pEngine::Run(std::string what, std::vector<P2pOp> ops, std::chrono::milliseconds timeout) {
  // The failure is moved over, not copied into a std::promise (whose set_exception copies it):
  // the engine's thread then keeps no reference to drop after this returned, which
  // ThreadSanitizer, blind to the count inside libstdc++, reports as a race with the caller's
  // reading of the exception.
  std::mutex mutex;
  std::condition_variable ended;
  bool finished = false;
  std::exception_ptr failure;
  Start(
      std::move(what), std::move(ops),
      [&](std::exception_ptr error) {
        std::lock_guard<std::mutex> lock(mutex);
        failure = std::move(error);
        finished = true;
        ended.notify_one();  // under the lock: once it is released, Run and `ended` may be gone
      },
      timeout);
  std::unique_lock<std::mutex> lock(mutex);
  ended.wait(lock, [&finished] { return finished; });
  if (failure) std::rethrow_exception(failure);
}

void P2pEngine::Loop() {
  std::deque<Batch> active;
  while (true) {
    std::deque<Batch> fresh;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (active.empty()) {
        ready_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
        if (queued_.empty()) return;  // stopping, and nothing in flight
      }
      fresh.swap(queued_);
    }
    bool moved = !fresh.empty();
    for (Batch& batch : fresh) {
      Post(batch);
      if (batch.done) active.push_back(std::move(batch));  // else it ended while posting
    }
    for (auto at = active.begin(); at != active.end();) {
      const size_t before = at->finished;
      if (Progress(*at)) {
        at = active.erase(at);
        moved = true;
      } else {
        moved = moved || at->finished != before;
        ++at;
      }
    }
    if (moved || active.empty()) continue;
    // Nothing moved: block in the transport on the oldest live request for a moment (it returns
    // early when that request completes) instead of spinning on test.
    Batch& oldest = active.front();
    for (size_t i = 0; i < oldest.requests.size(); ++i) {
      if (oldest.requests[i] == nullptr) continue;
      const chorus_status status = plugin_.request_wait(oldest.requests[i], kWaitSliceMs);
      if (status == CHORUS_OK) {
        plugin_.request_free(oldest.requests[i]);
        oldest.requests[i] = nullptr;
        ++oldest.finished;
      } else if (status != CHORUS_TIMEOUT) {
        Finish(oldest, status, OpText(oldest.ops[i]) + ": " + endpoint_->library().LastError());
        active.pop_front();
      }
      break;
    }
  }
}

void P2pEngine::Post(Batch& batch) {
  if (!first_failure_.empty()) {
    Finish(batch, CHORUS_ABORTED,
           "an earlier point-to-point operation of this process group failed (" + first_failure_ +
               "); create a new process group");
    return;
  }
  const chorus_transport_api& api = endpoint_->api();
  batch.requests.assign(batch.ops.size(), nullptr);
  for (size_t i = 0; i < batch.ops.size(); ++i) {
    const P2pOp& op = batch.ops[i];
    chorus_p2p_args args{};
    args.struct_size = sizeof(args);
    args.peer = op.peer;
    args.tag = op.tag;
    args.data = op.data;
    args.bytes = op.bytes;
    const chorus_status status = op.send
                                     ? api.isend(endpoint_->handle(), &args, &batch.requests[i])
                                     : api.irecv(endpoint_->handle(), &args, &batch.requests[i]);
    if (status != CHORUS_OK) {
      batch.requests[i] = nullptr;
      Finish(batch, status, OpText(op) + ": " + endpoint_->library().LastError());
      return;
    }
  }
  if (batch.ops.empty()) Finish(batch, CHORUS_OK, "");
}

bool P2pEngine::Progress(Batch& batch) {
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    chorus_request* request = batch.requests[i];
    if (request == nullptr) continue;
    int done = 0;
    const chorus_status status = plugin_.request_test(request, &done);
    const P2pOp& op = batch.ops[i];
    if (status != CHORUS_OK) {
      Finish(batch, status, OpText(op) + ": " + endpoint_->library().LastError());
      return true;
    }
    if (done != 0) {
      plugin_.request_free(request);
      batch.requests[i] = nullptr;
      ++batch.finished;
    }
  }
  if (batch.finished == batch.ops.size()) {
    Finish(batch, CHORUS_OK, "");
    return true;
  }
  if (Clock::now() >= batch.deadline) {
    std::string waiting;
    for (size_t i = 0; i < batch.requests.size(); ++i) {
      if (batch.requests[i] == nullptr) continue;
      if (!waiting.empty()) waiting += ", ";
      waiting += OpText(batch.ops[i]);
    }
    Finish(batch, CHORUS_TIMEOUT,
           "did not complete within its time-out of " + Seconds(batch.timeout) +
               " (still waiting: " + waiting +
               "); every rank must post the matching operations (same tag, same size)");
    return true;
  }
  return false;
}

void P2pEngine::Finish(Batch& batch, chorus_status status, const std::string& message) {
  std::string text = batch.what.empty() ? message : batch.what + ": " + message;
  if (status != CHORUS_OK && first_failure_.empty()) {
    first_failure_ = text;
    // Ends every other request of the endpoint now (plugin.h T5), instead of at its time-out.
    endpoint_->Abort();
  } else if (status != CHORUS_OK && message.find(first_failure_) == std::string::npos) {
    // A batch in flight that the abort above ended: the transport says only "aborted".
    text += " (after an earlier point-to-point operation of this process group failed: " +
            first_failure_ + ")";
  }
  for (chorus_request*& request : batch.requests) {
    // After the abort above (or an earlier one) a live request may be freed (plugin.h).
    if (request != nullptr) plugin_.request_free(request);
    request = nullptr;
  }
  Done done = std::move(batch.done);
  batch.done = nullptr;
  if (status == CHORUS_OK) {
    done(nullptr);
  } else {
    // The temporary Error shares its message with the one thrown (libstdc++'s runtime_error
    // counts references): it goes before `done` hands the failure over, not after.
    std::exception_ptr failure = std::make_exception_ptr(Error(status, text));
    done(std::move(failure));
  }
}

}  // namespace chorus::torch_backend
