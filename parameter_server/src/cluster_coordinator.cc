// ClusterCoordinator: a queue of closures (scheduled functions) and, per worker, threads that
// take closures from it and run them there with the Run RPC. A worker that fails the RPC at the
// transport (dead, unreachable, past the deadline and silent) has its closure put back at the
// queue's front and is probed until it answers again; a run past its deadline on a worker that
// still answers is run again, a bounded number of times; a function's own error, or a ps its
// function could not reach, is kept to be raised once and cancels what is queued.
#include <chorus/parameter_server/cluster_coordinator.h>

#include <deque>
#include <set>
#include <thread>

#include "ps_internal.h"

namespace chorus {
namespace {

using Clock = std::chrono::steady_clock;
using ps_internal::ClosureState;
namespace rpc = ps_internal::rpc;

constexpr auto kProbeInterval = std::chrono::milliseconds(200);
constexpr auto kProbeDeadline = std::chrono::milliseconds(1000);
// How often one function may pass its deadline on workers that still answer before the job
// fails naming it (a slow or stuck function would otherwise run again forever).
constexpr int kMaxDeadlineMisses = 3;

}  // namespace

// ---- RemoteValue, PerWorkerDataset -------------------------------------------------------------

RemoteValue::RemoteValue(std::shared_ptr<ClosureState> state) : state_(std::move(state)) {}

std::vector<Tensor> RemoteValue::fetch() const {
  if (state_ == nullptr) throw Error(CHORUS_INVALID_ARGUMENT, "fetch() of an empty RemoteValue");
  std::unique_lock lock(state_->mutex);
  state_->ready.wait(lock, [this] { return state_->finished; });
  if (state_->error) state_->error->Throw();
  return state_->outputs;
}

bool RemoteValue::is_ready() const {
  if (state_ == nullptr) return false;
  std::lock_guard lock(state_->mutex);
  return state_->finished;
}

int RemoteValue::worker() const {
  if (state_ == nullptr) return -1;
  std::lock_guard lock(state_->mutex);
  return state_->worker;
}

PerWorkerIterator PerWorkerDataset::iterator() const {
  return PerWorkerIterator{id, dataset_function};
}

// ---- ClusterCoordinator ----------------------------------------------------------------------

struct ClusterCoordinator::State {
  struct Worker {
    std::string address;
    std::unique_ptr<rpc::Task::Stub> stub;
    bool down = false;
    Clock::time_point down_since;
    uint64_t known_layout = 0;  // the layout version this worker is known to hold (0: none)
  };

  ParameterServerStrategy& strategy;
  CoordinatorOptions options;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<ClosureState>> queue;
  std::vector<Worker> workers;
  std::vector<grpc::ClientContext*> calls;  // in flight, cancelled at destruction
  std::vector<std::thread> threads;
  std::optional<ps_internal::Failure> pending_error;
  int64_t in_flight = 0;
  int64_t completed = 0;
  int64_t retried = 0;
  uint64_t next_closure_id = 1;
  uint64_t error_boundary = 0;  // closures scheduled before this id raise no new error
  uint64_t next_dataset_id = 1;
  bool stopping = false;
  bool keep_servers = false;
  std::set<int> lost_ps;  // the ps tasks a function could not reach

  State(ParameterServerStrategy& s, CoordinatorOptions o) : strategy(s), options(o) {}

  std::string WorkerName(size_t w) const {
    return "worker " + std::to_string(w) + " at " + workers[w].address;
  }

  // With `mutex` held: records the error of `closure_id` (0: of the job) to be raised, unless
  // the closure was scheduled before the last error was recorded (what was in flight then fails
  // quietly: an error is raised once), and cancels every queued closure.
  void FailLocked(const Error& error, uint64_t closure_id) {
    if (!pending_error && (closure_id == 0 || closure_id >= error_boundary)) {
      pending_error.emplace(error);
      error_boundary = next_closure_id;
    }
    const Error cancelled(CHORUS_ABORTED,
                          std::string("cancelled: an earlier function failed: ") + error.what());
    for (const auto& closure : queue) closure->Fail(cancelled, -1);
    queue.clear();
    changed.notify_all();
  }

  // Whether worker w answers a ping now.
  bool Answers(size_t w) {
    grpc::ClientContext context;
    ps_internal::PrepareCall(context, kProbeDeadline, strategy.client().credential());
    rpc::Empty request;
    rpc::PingReply reply;
    return workers[w].stub->Ping(&context, request, &reply).ok();
  }

  // With `mutex` held: `closure`'s run passed its deadline on worker w, which still answers
  // (`cause`: what the worker said it was waiting for, if it said). It runs again, at the
  // queue's front, until it has done so kMaxDeadlineMisses times; then the job fails naming it.
  void MissedDeadlineLocked(size_t w, const std::shared_ptr<ClosureState>& closure,
                            const std::string& cause) {
    --in_flight;
    closure->deadline_misses += 1;
    closure->missed_on += (closure->missed_on.empty() ? "" : ", ") + WorkerName(w);
    if (!cause.empty()) closure->last_miss = cause;
    if (closure->deadline_misses < kMaxDeadlineMisses) {
      queue.push_front(closure);
      ++retried;
      changed.notify_all();
      return;
    }
    const Error error(
        CHORUS_TIMEOUT,
        "function '" + closure->request.function() + "' ran past its deadline of " +
            ps_internal::Seconds(options.function_timeout) + " " +
            std::to_string(closure->deadline_misses) + " times (on " + closure->missed_on +
            "), and each worker still answered: the function is slow or stuck" +
            (closure->last_miss.empty() ? "" : "; the last time, " + closure->last_miss) +
            ". Raise CoordinatorOptions::function_timeout (default 2 x CHORUS_TIMEOUT_SECONDS; "
            "it must leave room for the function's own work and a whole CHORUS_TIMEOUT_SECONDS "
            "on a ps) if the function is only slow");
    closure->Fail(error, static_cast<int>(w));
    FailLocked(error, closure->id);
  }

  // Pings worker w until it answers (then it takes work again) or the coordinator stops; fails
  // the job when every worker has been down for worker_lost_timeout.
  void Probe(size_t w) {
    while (true) {
      grpc::ClientContext context;
      ps_internal::PrepareCall(context, kProbeDeadline, strategy.client().credential());
      rpc::Empty request;
      rpc::PingReply reply;
      const grpc::Status status = workers[w].stub->Ping(&context, request, &reply);
      std::unique_lock lock(mutex);
      if (stopping) return;
      if (status.ok()) {
        workers[w].down = false;
        workers[w].known_layout = 0;  // maybe a new process: it gets the layout again
        changed.notify_all();
        return;
      }
      bool all_down_long = true;
      std::string names;
      for (size_t i = 0; i < workers.size(); ++i) {
        all_down_long = all_down_long && workers[i].down &&
                        Clock::now() - workers[i].down_since > options.worker_lost_timeout;
        names += (names.empty() ? "" : ", ") + WorkerName(i);
      }
      if (all_down_long && !queue.empty()) {
        FailLocked(
            Error(CHORUS_PEER_LOST, "every worker has been unreachable for more than " +
                                        std::to_string(options.worker_lost_timeout.count() / 1000) +
                                        " s (" + names + "); restart them (same addresses)"),
            0);
      }
      changed.wait_for(lock, kProbeInterval, [this] { return stopping; });
      if (stopping) return;
    }
  }

  // Runs `closure` on worker w. A worker that fails at the transport puts it back in the queue
  // and is marked down.
  void RunOn(size_t w, const std::shared_ptr<ClosureState>& closure) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      rpc::RunRequest request = closure->request;
      const std::shared_ptr<const ps_internal::Layout> layout = strategy.layout();
      request.set_layout_version(layout->version);
      request.set_ps_timeout_ms(strategy.options().rpc_timeout.count());
      {
        std::lock_guard lock(mutex);
        if (workers[w].known_layout != layout->version) layout->ToProto(request.mutable_layout());
      }
      grpc::ClientContext context;
      ps_internal::PrepareCall(context, options.function_timeout, strategy.client().credential());
      {
        std::lock_guard lock(mutex);
        if (stopping) {
          closure->Fail(Error(CHORUS_ABORTED, "the coordinator was destroyed"), -1);
          --in_flight;
          return;
        }
        calls.push_back(&context);
      }
      rpc::RunReply reply;
      const grpc::Status status = workers[w].stub->Run(&context, request, &reply);
      // Past the deadline, a worker that answers a ping is alive: its function ran out of time.
      const bool late_but_alive =
          status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && Answers(w);
      std::unique_lock lock(mutex);
      std::erase(calls, &context);
      if (!stopping && (late_but_alive ||
                        (status.ok() && reply.outcome() == rpc::RunReply::DEADLINE_EXCEEDED))) {
        MissedDeadlineLocked(w, closure, late_but_alive ? "" : reply.error());
        return;
      }
      if (!status.ok() && ps_internal::IsTransportFailure(status) && !stopping) {
        queue.push_front(closure);
        --in_flight;
        ++retried;
        if (!workers[w].down) {
          workers[w].down = true;
          workers[w].down_since = Clock::now();
        }
        changed.notify_all();
        return;
      }
      if (!status.ok()) {
        --in_flight;
        const Error error(stopping ? CHORUS_ABORTED : CHORUS_INTERNAL,
                          WorkerName(w) + " refused function '" + request.function() +
                              "': " + status.error_message());
        closure->Fail(error, static_cast<int>(w));
        if (!stopping) FailLocked(error, closure->id);
        changed.notify_all();
        return;
      }
      if (reply.outcome() == rpc::RunReply::NEED_LAYOUT) {
        workers[w].known_layout = 0;
        continue;
      }
      workers[w].known_layout = layout->version;
      if (reply.outcome() == rpc::RunReply::OK) {
        lock.unlock();
        std::vector<Tensor> outputs;
        try {
          for (const auto& output : reply.outputs()) {
            outputs.push_back(ps_internal::FromProto(output, "a result of " + request.function()));
          }
          closure->Finish(std::move(outputs), static_cast<int>(w));
        } catch (const Error& e) {
          closure->Fail(e, static_cast<int>(w));
        }
        lock.lock();
        --in_flight;
        ++completed;
        changed.notify_all();
        return;
      }
      --in_flight;
      if (reply.outcome() == rpc::RunReply::PS_UNAVAILABLE) lost_ps.insert(reply.failed_ps());
      const Error error =
          reply.outcome() == rpc::RunReply::PS_UNAVAILABLE
              ? Error(reply.status() == CHORUS_TIMEOUT ? CHORUS_TIMEOUT : CHORUS_PEER_LOST,
                      "function '" + request.function() + "' on " + WorkerName(w) +
                          " could not reach ps " + std::to_string(reply.failed_ps()) + ": " +
                          reply.error() +
                          ". A parameter-server job does not survive a ps failure: restart the "
                          "ps tasks and the chief from the last checkpoint")
              : Error(CHORUS_INTERNAL, "function '" + request.function() + "' failed on " +
                                           WorkerName(w) + ": " + reply.error());
      closure->Fail(error, static_cast<int>(w));
      FailLocked(error, closure->id);
      return;
    }
    std::lock_guard lock(mutex);
    --in_flight;
    const Error error(CHORUS_INTERNAL, WorkerName(w) + " asked twice for the variables' layout");
    closure->Fail(error, static_cast<int>(w));
    FailLocked(error, closure->id);
  }

  void WorkerLoop(size_t w) {
    while (true) {
      std::shared_ptr<ClosureState> closure;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stopping || workers[w].down || !queue.empty(); });
        if (stopping) return;
        if (workers[w].down) {
          lock.unlock();
          Probe(w);
          continue;
        }
        closure = queue.front();
        queue.pop_front();
        ++in_flight;
      }
      RunOn(w, closure);
    }
  }
};

ClusterCoordinator::ClusterCoordinator(ParameterServerStrategy& strategy,
                                       CoordinatorOptions options)
    : strategy_(strategy), state_(std::make_unique<State>(strategy, options)) {
  CoordinatorOptions& o = state_->options;
  // Room for the function's own work and for a whole rpc_timeout on a ps that stopped answering:
  // the worker reports that ps before this deadline passes.
  if (o.function_timeout.count() <= 0) o.function_timeout = 2 * strategy.options().rpc_timeout;
  if (o.worker_lost_timeout.count() <= 0)
    o.worker_lost_timeout = 5 * strategy.options().rpc_timeout;
  if (o.max_queued < 1) o.max_queued = 1;
  if (o.functions_per_worker < 1) o.functions_per_worker = 1;
  for (const std::string& address :
       ps_internal::JobAddresses(strategy.cluster_resolver(), "worker")) {
    State::Worker worker;
    worker.address = address;
    worker.stub = rpc::Task::NewStub(ps_internal::MakeChannel(address));
    state_->workers.push_back(std::move(worker));
  }
  // Every worker must answer once before work is scheduled: a wrong address fails here.
  for (size_t w = 0; w < state_->workers.size(); ++w) {
    ps_internal::AwaitTask(*state_->workers[w].stub, state_->WorkerName(w), "worker",
                           strategy.options().connect_timeout, strategy.client().credential());
  }
  for (size_t w = 0; w < state_->workers.size(); ++w) {
    for (int k = 0; k < o.functions_per_worker; ++k) {
      state_->threads.emplace_back([this, w] { state_->WorkerLoop(w); });
    }
  }
}

ClusterCoordinator::~ClusterCoordinator() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    const Error destroyed(CHORUS_ABORTED, "the coordinator was destroyed before it ran");
    for (const auto& closure : state_->queue) closure->Fail(destroyed, -1);
    state_->queue.clear();
    for (grpc::ClientContext* call : state_->calls) call->TryCancel();
    state_->changed.notify_all();
  }
  for (std::thread& thread : state_->threads) thread.join();
  if (state_->keep_servers) return;
  // Not the ps tasks a function found not answering: a stopped one would only hold the caller
  // (who waits to report that very failure) for the shutdown's deadline.
  std::vector<rpc::Task::Stub*> tasks;
  for (auto& worker : state_->workers) tasks.push_back(worker.stub.get());
  const ps_internal::PsClient& client = strategy_.client();
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    if (!state_->lost_ps.contains(ps)) tasks.push_back(&client.stub(ps));
  }
  ps_internal::ShutdownTasks(tasks, client.credential());
}

RemoteValue ClusterCoordinator::schedule(const std::string& function, std::vector<Tensor> args) {
  return schedule(function, PerWorkerIterator{}, std::move(args));
}

RemoteValue ClusterCoordinator::schedule(const std::string& function,
                                         const PerWorkerIterator& iterator,
                                         std::vector<Tensor> args) {
  auto closure = std::make_shared<ClosureState>();
  closure->request.set_function(function);
  for (const Tensor& arg : args) ps_internal::ToProto(arg, closure->request.add_args());
  if (iterator.id != 0) {
    closure->request.mutable_iterator()->set_id(iterator.id);
    closure->request.mutable_iterator()->set_dataset_function(iterator.dataset_function);
  }
  std::unique_lock lock(state_->mutex);
  const auto raise_pending = [&] {
    if (!state_->pending_error) return;
    const ps_internal::Failure failure = *state_->pending_error;
    state_->pending_error.reset();
    failure.Throw();
  };
  raise_pending();
  state_->changed.wait(lock, [&] {
    return state_->pending_error || state_->queue.size() < state_->options.max_queued;
  });
  raise_pending();
  closure->id = state_->next_closure_id++;
  closure->request.set_closure_id(closure->id);
  state_->queue.push_back(closure);
  state_->changed.notify_all();
  return RemoteValue(closure);
}

void ClusterCoordinator::join() {
  std::unique_lock lock(state_->mutex);
  state_->changed.wait(lock, [&] {
    return state_->pending_error || (state_->queue.empty() && state_->in_flight == 0);
  });
  if (state_->pending_error) {
    const ps_internal::Failure failure = *state_->pending_error;
    state_->pending_error.reset();
    failure.Throw();
  }
}

bool ClusterCoordinator::done() {
  std::lock_guard lock(state_->mutex);
  if (state_->pending_error) {
    const ps_internal::Failure failure = *state_->pending_error;
    state_->pending_error.reset();
    failure.Throw();
  }
  return state_->queue.empty() && state_->in_flight == 0;
}

std::vector<std::vector<Tensor>> ClusterCoordinator::fetch(const std::vector<RemoteValue>& values) {
  std::vector<std::vector<Tensor>> out;
  for (const RemoteValue& value : values) out.push_back(value.fetch());
  return out;
}

PerWorkerDataset ClusterCoordinator::create_per_worker_dataset(
    const std::string& dataset_function) {
  std::lock_guard lock(state_->mutex);
  return PerWorkerDataset{state_->next_dataset_id++, dataset_function};
}

int64_t ClusterCoordinator::completed() const {
  std::lock_guard lock(state_->mutex);
  return state_->completed;
}

int64_t ClusterCoordinator::retried() const {
  std::lock_guard lock(state_->mutex);
  return state_->retried;
}

void ClusterCoordinator::keep_servers_running() {
  std::lock_guard lock(state_->mutex);
  state_->keep_servers = true;
}

}  // namespace chorus
