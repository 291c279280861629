// Asynchronous work for ProcessGroupChorus: each operation becomes a ChorusWork and runs on the
// process group's one worker thread, in the order it was issued. Every rank issues a group's
// operations in the same order (torch.distributed requires it), so one FIFO thread per group
// keeps the ranks' collectives matched while the caller (DDP's backward) goes on.
#ifndef CHORUS_BINDINGS_PYTORCH_WORK_QUEUE_H_
#define CHORUS_BINDINGS_PYTORCH_WORK_QUEUE_H_

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace chorus::torch_backend {

class WorkQueue;

class ChorusWork : public c10d::Work {
 public:
  // `outputs`: what result() and the future hold once the work is done. `wait_timeout`: how long
  // wait() without a time-out of its own waits (the operation's options' time-out; kNoTimeout:
  // until the operation ends, which chorus bounds by the group's time-out).
  ChorusWork(int rank, c10d::OpType type, const char* profiling_title, std::string op,
             std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds wait_timeout);

  // Throws when `timeout` (or the operation's time-out) passes first, naming the operation;
  // rethrows the operation's failure. Without a time-out (here or in the operation's options),
  // when the worker has not taken the operation yet, runs it (and whatever was queued before it)
  // on the calling thread: a caller that waits at once (a synchronous call) then pays no
  // hand-over to the worker and back.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  const std::string& op() const { return op_; }
  // Called once, on the worker thread: completes the future with the outputs (running its
  // callbacks, e.g. DDP's), then the work.
  void Succeed();
  void Fail(std::exception_ptr error);

 private:
  friend class WorkQueue;
  std::string op_;
  std::vector<at::Tensor> outputs_;
  std::weak_ptr<WorkQueue> queue_;  // set by Push; expired once the queue is gone
  std::chrono::milliseconds wait_timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// What a work fails with when `error` ended `op`: "chorus: <op> failed: <chorus's status>: <its
// words>" (e.g. PEER_LOST naming the rank that went away), as a std::runtime_error.
std::exception_ptr OperationFailure(const std::string& op, std::exception_ptr error);

class WorkQueue : public std::enable_shared_from_this<WorkQueue> {
 public:
  // Starts the worker thread. Made through std::make_shared (works keep a weak_ptr to it).
  WorkQueue();
  // Stop()s.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `body` for `work`; the work fails with body's exception ("chorus: <op> failed: ...").
  void Push(c10::intrusive_ptr<ChorusWork> work, std::function<void()> body);
  // Runs what is queued (the other ranks expect it), then stops the thread; later Pushes fail
  // their work. Idempotent.
  void Stop();

 private:
  friend class ChorusWork;
  struct Item {
    c10::intrusive_ptr<ChorusWork> work;
    std::function<void()> body;
    std::chrono::steady_clock::time_point queued_at;
  };
  void Loop();
  // On a waiter's thread: when nothing runs and `work` is still queued, runs the queue's items
  // up to and including it, in order.
  void RunHere(const ChorusWork* work);
  static void Run(Item& item);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> items_;
  bool running_ = false;  // an item runs (on the worker, or on a waiter's thread)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chorus::torch_backend

#endif  // CHORUS_BINDINGS_PYTORCH_WORK_QUEUE_H_
