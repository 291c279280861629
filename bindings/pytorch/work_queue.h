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
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace chorus::torch_backend {

class ChorusWork : public c10d::Work {
 public:
  // `outputs`: what result() and the future hold once the work is done. `wait_timeout`: how long
  // wait() without a time-out of its own waits (the operation's options' time-out; kNoTimeout:
  // until the operation ends, which chorus bounds by the group's time-out).
  ChorusWork(int rank, c10d::OpType type, const char* profiling_title, std::string op,
             std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds wait_timeout);

  // Throws when `timeout` (or the operation's time-out) passes first, naming the operation;
  // rethrows the operation's failure.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  const std::string& op() const { return op_; }
  // Called once, on the worker thread: completes the future with the outputs (running its
  // callbacks, e.g. DDP's), then the work.
  void Succeed();
  void Fail(std::exception_ptr error);

 private:
  std::string op_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds wait_timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// What a work fails with when `error` ended `op`: "chorus: <op> failed: <chorus's status>: <its
// words>" (e.g. PEER_LOST naming the rank that went away), as a std::runtime_error.
std::exception_ptr OperationFailure(const std::string& op, std::exception_ptr error);

class WorkQueue {
 public:
  WorkQueue();
  // Runs what is queued (the other ranks expect it), then stops the thread.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `body` for `work`; the work fails with body's exception ("chorus: <op> failed: ...").
  // `run_here_when_idle`: when nothing is queued or running, run it on the calling thread before
  // returning instead (the order stays the issue order): for small operations, handing over to
  // the worker thread and waking the caller again costs more than the operation.
  void Push(c10::intrusive_ptr<ChorusWork> work, std::function<void()> body,
            bool run_here_when_idle = false);

 private:
  struct Item {
    c10::intrusive_ptr<ChorusWork> work;
    std::function<void()> body;
  };
  void Loop();
  static void Run(Item& item);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> items_;
  bool running_ = false;  // an item runs (on the worker, or on a caller's thread)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chorus::torch_backend

#endif  // CHORUS_BINDINGS_PYTORCH_WORK_QUEUE_H_
