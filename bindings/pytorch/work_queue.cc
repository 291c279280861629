#include "work_queue.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>
#include <chorus/base/error.h>

#include <stdexcept>

namespace chorus::torch_backend {
namespace {

std::string Seconds(std::chrono::milliseconds ms) {
  std::string text = std::to_string(static_cast<double>(ms.count()) / 1000.0);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

// How long the worker leaves a freshly queued operation to a caller that may wait on it at once.
// An asynchronous caller's operation (DDP's buckets) starts this much later.
constexpr auto kClaimGrace = std::chrono::microseconds(100);

}  // namespace

ChorusWork::ChorusWork(int rank, c10d::OpType type, const char* profiling_title, std::string op,
                       std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
                       std::chrono::milliseconds wait_timeout)
    : c10d::Work(rank, type, profiling_title, c10::optional<std::vector<at::Tensor>>(inputs)),
      op_(std::move(op)),
      outputs_(std::move(outputs)),
      wait_timeout_(wait_timeout),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool ChorusWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) timeout = wait_timeout_;
  // Only a wait without a time-out of its own may run the operation here: the operation may
  // block until every rank has issued it, longer than such a time-out.
  if (timeout == kNoTimeout) {
    if (const std::shared_ptr<WorkQueue> queue = queue_.lock()) queue->RunHere(this);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [this] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
    TORCH_CHECK(false, "chorus: ", op_, " did not complete within the time-out of ",
                Seconds(timeout), " (Work.wait); it may still complete later");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void ChorusWork::Succeed() {
  future_->markCompleted(c10::IValue(outputs_));
  finish();
}

void ChorusWork::Fail(std::exception_ptr error) {
  future_->setError(error);
  finish(error);
}

std::exception_ptr OperationFailure(const std::string& op, std::exception_ptr error) {
  const std::string lead = "chorus: " + op + " failed: ";
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return std::make_exception_ptr(
        std::runtime_error(lead + StatusName(e.status()) + ": " + e.what()));
  } catch (const c10::Error& e) {
    return std::make_exception_ptr(std::runtime_error(lead + e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(std::runtime_error(lead + e.what()));
  } catch (...) {
    return std::make_exception_ptr(std::runtime_error(lead + "an unknown exception"));
  }
}

WorkQueue::WorkQueue() : thread_([this] { Loop(); }) {}

WorkQueue::~WorkQueue() { Stop(); }

void WorkQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void WorkQueue::Push(c10::intrusive_ptr<ChorusWork> work, std::function<void()> body) {
  work->queue_ = weak_from_this();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      items_.push_back({std::move(work), std::move(body), std::chrono::steady_clock::now()});
      ready_.notify_one();
      return;
    }
  }
  work->Fail(std::make_exception_ptr(std::runtime_error(
      "chorus: " + work->op() + " failed: the process group is being destroyed")));
}

void WorkQueue::RunHere(const ChorusWork* work) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto queued = [&] {
    for (const Item& item : items_) {
      if (item.work.get() == work) return true;
    }
    return false;
  };
  while (!running_ && queued()) {
    Item item = std::move(items_.front());
    items_.pop_front();
    running_ = true;
    lock.unlock();
    Run(item);
    lock.lock();
    running_ = false;
    ready_.notify_all();  // the worker may take the next one
  }
}

void WorkQueue::Loop() {
  while (true) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return (stopping_ || !items_.empty()) && !running_; });
      if (items_.empty()) return;  // stopping, and nothing left to run
      // A synchronous caller waits on its work at once (wait() -> RunHere): leave it a moment
      // to run it on its own thread, where its tensor's bytes are in cache, before taking it.
      const auto due = items_.front().queued_at + kClaimGrace;
      if (!stopping_ && std::chrono::steady_clock::now() < due) {
        ready_.wait_until(lock, due);
        continue;
      }
      item = std::move(items_.front());
      items_.pop_front();
      running_ = true;
    }
    Run(item);
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
    ready_.notify_all();
  }
}

void WorkQueue::Run(Item& item) {
  std::exception_ptr failure;
  try {
    // The bodies write into the caller's tensors (which may require grad) behind autograd's
    // back, as every backend does; the futures' callbacks below run in the caller's mode.
    at::NoGradGuard no_grad;
    item.body();
  } catch (...) {
    failure = OperationFailure(item.work->op(), std::current_exception());
  }
  // A future's callbacks run here (DDP's); what they throw belongs to them.
  if (failure) {
    item.work->Fail(failure);
  } else {
    item.work->Succeed();
  }
}

}  // namespace chorus::torch_backend
