#include "distribute/replica_group.h"

#include <chorus/base/error.h>

#include <chrono>
#include <thread>

#include "base/helper_pool.h"

namespace chorus::internal {

ReplicaGroup::ReplicaGroup(int num_replicas) {
  if (num_replicas < 1)
    throw Error(CHORUS_INVALID_ARGUMENT, "a strategy needs at least one replica");
  kinds_.resize(static_cast<size_t>(num_replicas));
  spin_ = static_cast<unsigned>(num_replicas) <= std::thread::hardware_concurrency();
  values_.resize(static_cast<size_t>(num_replicas));
  size_ = num_replicas;
  // Replica 0 runs on Run's caller, which would only wait otherwise: one thread fewer to wake,
  // and on a machine with a core per replica no thread shares a core.
  for (int i = 1; i < num_replicas; ++i) threads_.emplace_back([this, i] { ThreadMain(i); });
}

template <typename Done>
void ReplicaGroup::SpinBriefly(const Done& done) const {
  if (!spin_) return;
  // About a futex sleep and wake-up on a VM: longer spins cost a busy core more than they save.
  constexpr auto kSpin = std::chrono::microseconds(30);
  auto until = std::chrono::steady_clock::now() + kSpin;
  while (!done() && std::chrono::steady_clock::now() < until) {
    // The replica running the merge may have published a parallel loop (the host all-reduce):
    // lend it this thread, then spin on for the result.
    if (HelperPool::Get().JoinAsGuest()) {
      until = std::chrono::steady_clock::now() + kSpin;
    } else {
      std::this_thread::yield();
    }
  }
}

ReplicaGroup::~ReplicaGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void ReplicaGroup::ThreadMain(int replica) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    SpinBriefly([&] { return job_signal_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || job_generation_ != seen; });
      if (stopping_) return;
      seen = job_generation_;
      job = job_;
    }
    RunReplica(replica, *job);
  }
}

void ReplicaGroup::RunReplica(int replica, const std::function<void(int)>& job) {
  std::exception_ptr error;
  try {
    job(replica);
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (error) {
    // Keep the root cause: a replica that failed because another aborted the job comes later.
    if (!first_error_) first_error_ = error;
    if (abort_reason_.empty()) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      Abort("replica " + std::to_string(replica) + " failed: " + what);
    }
  } else {
    ++returned_;
    if (arrived_ > 0 && abort_reason_.empty()) {
      Abort("replica " + std::to_string(replica) + " returned from the replica function while " +
            std::to_string(arrived_) + " other replica(s) wait in " + kinds_[0] +
            ": every replica must make the same merge_call/all_reduce calls in the same order");
    }
  }
  if (--running_ == 0) done_cv_.notify_all();
}

void ReplicaGroup::Abort(const std::string& reason) {
  abort_reason_ = reason;
  aborted_.store(true, std::memory_order_release);
  meet_cv_.notify_all();
}

void ReplicaGroup::Run(const std::function<void(int)>& body) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &body;
  running_ = size();
  returned_ = 0;
  first_error_ = nullptr;
  abort_reason_.clear();
  aborted_.store(false, std::memory_order_release);
  arrived_ = 0;
  ++job_generation_;
  job_signal_.store(job_generation_, std::memory_order_release);
  lock.unlock();
  work_cv_.notify_all();
  RunReplica(0, body);
  lock.lock();
  done_cv_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
  if (first_error_) std::rethrow_exception(first_error_);
  if (!abort_reason_.empty()) throw Error(CHORUS_INVALID_ARGUMENT, abort_reason_);
}

std::any ReplicaGroup::Rendezvous(int replica, const std::string& kind, std::any value,
                                  const std::function<std::any(std::vector<std::any>&)>& merge,
                                  double timeout_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!abort_reason_.empty()) throw Error(CHORUS_ABORTED, abort_reason_);
  if (returned_ > 0) {
    Abort("replica " + std::to_string(replica) + " called " + kind + " but " +
          std::to_string(returned_) +
          " replica(s) already returned from the replica function: every replica must make the "
          "same merge_call/all_reduce calls in the same order");
    throw Error(CHORUS_INVALID_ARGUMENT, abort_reason_);
  }
  const size_t me = static_cast<size_t>(replica);
  kinds_[me] = kind;
  values_[me] = std::move(value);
  const uint64_t generation = meet_generation_;
  if (++arrived_ < size()) {
    lock.unlock();
    SpinBriefly([&] {
      return meet_signal_.load(std::memory_order_acquire) != generation ||
             aborted_.load(std::memory_order_acquire);
    });
    lock.lock();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_seconds));
    const bool met = meet_cv_.wait_until(
        lock, deadline, [&] { return meet_generation_ != generation || !abort_reason_.empty(); });
    if (meet_generation_ != generation) return result_;
    if (!met) {
      Abort("replica " + std::to_string(replica) + " waited " + std::to_string(timeout_seconds) +
            " s in " + kind + " for the other replicas (" + std::to_string(arrived_) + " of " +
            std::to_string(size()) + " arrived); raise CHORUS_TIMEOUT_SECONDS if they are slow");
      throw Error(CHORUS_TIMEOUT, abort_reason_);
    }
    throw Error(CHORUS_ABORTED, abort_reason_);
  }
  // The last to arrive checks the calls match, then merges for everyone.
  for (size_t i = 0; i < kinds_.size(); ++i) {
    if (kinds_[i] != kinds_[0]) {
      Abort("replica " + std::to_string(i) + " called " + kinds_[i] + " while replica 0 called " +
            kinds_[0] + ": every replica must make the same calls in the same order");
      throw Error(CHORUS_INVALID_ARGUMENT, abort_reason_);
    }
  }
  std::vector<std::any> values = std::move(values_);
  values_.assign(values.size(), std::any());
  lock.unlock();
  std::any result;
  try {
    result = merge(values);
  } catch (const std::exception& e) {
    lock.lock();
    Abort(kind + " failed: " + e.what());
    throw;
  }
  lock.lock();
  result_ = std::move(result);
  arrived_ = 0;
  ++meet_generation_;
  meet_signal_.store(meet_generation_, std::memory_order_release);
  meet_cv_.notify_all();
  return result_;
}

}  // namespace chorus::internal
