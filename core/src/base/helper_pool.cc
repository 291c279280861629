#include "base/helper_pool.h"

#include <algorithm>
#include <chrono>
#include <system_error>

namespace chorus::internal {
namespace {

// The generation this thread last entered, as Run's caller or as a guest: a thread enters each
// generation at most once, so a JoinAsGuest from inside the work it runs does not nest.
thread_local uint64_t entered_generation = 0;

}  // namespace

HelperPool& HelperPool::Get() {
  static HelperPool pool;
  return pool;
}

void HelperPool::Run(unsigned threads, const std::function<void()>& work) {
  std::unique_lock<std::mutex> turn(turn_, std::defer_lock);
  if (threads <= 1 && !turn.try_lock()) {
    // Another thread's loop holds the pool: a loop that wants no helper runs alone rather than
    // wait its turn (independent callers' small reduces stay concurrent).
    work();
    return;
  }
  if (!turn.owns_lock()) turn.lock();
  unsigned helpers = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (threads_.size() + 1 < threads) {
      try {
        // Started under the lock: it has not seen this call's generation yet.
        threads_.emplace_back([this, seen = generation_] { Loop(seen); });
      } catch (const std::system_error&) {
        break;  // the caller does the work of those it could not start
      }
    }
    helpers =
        std::min<unsigned>(threads > 0 ? threads - 1 : 0, static_cast<unsigned>(threads_.size()));
    work_ = &work;
    wanted_ = helpers;
    running_.store(helpers, std::memory_order_relaxed);
    ++generation_;
    entered_generation = generation_;
    open_generation_.store(generation_, std::memory_order_release);
  }
  if (helpers > 0) wake_.notify_all();
  work();
  open_generation_.store(0, std::memory_order_release);  // no guest enters from here on
  // The others are on their last piece (the work is shared piece by piece): spin for them
  // briefly, as a futex sleep and wake-up costs more than a piece on a VM.
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
  while (running_.load(std::memory_order_acquire) != 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return running_.load(std::memory_order_relaxed) == 0; });
  work_ = nullptr;
}

bool HelperPool::JoinAsGuest() {
  const uint64_t open = open_generation_.load(std::memory_order_acquire);
  if (open == 0 || open == entered_generation) return false;
  const std::function<void()>* work = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_generation_.load(std::memory_order_relaxed) != generation_ || work_ == nullptr) {
      return false;
    }
    entered_generation = generation_;
    running_.fetch_add(1, std::memory_order_relaxed);
    work = work_;
  }
  (*work)();
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_.fetch_sub(1, std::memory_order_release) == 1) done_.notify_all();
  return true;
}

HelperPool::~HelperPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void HelperPool::Loop(uint64_t seen) {
  for (;;) {
    const std::function<void()>* work = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && wanted_ > 0); });
      if (stopping_) return;
      seen = generation_;
      --wanted_;
      work = work_;
    }
    (*work)();  // work() catches its own exceptions
    std::lock_guard<std::mutex> lock(mutex_);
    if (running_.fetch_sub(1, std::memory_order_release) == 1) done_.notify_all();
  }
}

}  // namespace chorus::internal
