#include "base/watchdog.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/logging.h"

namespace chorus::internal {
namespace {

using Clock = std::chrono::steady_clock;

// CLOCK_MONOTONIC_COARSE: the steady clock's time (the same epoch) to within a few milliseconds,
// read in a few nanoseconds instead of tens: every collective operation reads it once.
Clock::time_point CoarseNow() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return Clock::time_point(std::chrono::seconds(now.tv_sec) +
                           std::chrono::nanoseconds(now.tv_nsec));
}

enum State : int { kArmed = 0, kLateCalled = 1, kLateDone = 2 };

constexpr auto kTick = std::chrono::milliseconds(100);

// Never destroyed: the thread runs until the process ends, and calls may be armed while static
// objects are destroyed at exit.
struct Watchdog {
  std::mutex mutex;
  std::condition_variable late_done;  // an OnLate returned
  WatchedCall* head = nullptr;
  bool thread_started = false;
};

Watchdog* g_watchdog = new Watchdog();

// A child of fork() has none of the parent's threads: it starts with an empty watchdog.
void ResetInChild() { g_watchdog = new Watchdog(); }

[[noreturn]] void EndProcess(const std::string& text) {
  // Straight to stderr: the logger's lock may be held by a thread that will never return.
  const std::string line = "[chorus watchdog] " + text + "\n";
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(2, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::_exit(kWatchdogExitStatus);
}

std::string Seconds(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms.count()) / 1000);
  return text;
}

void RunWatchdog(Watchdog* dog) {
  std::unique_lock<std::mutex> lock(dog->mutex);
  for (;;) {
    // A tick, whether anything is armed or not: an Arm then needs no wake-up call (a system call
    // per collective operation, and a switch to this thread), at the cost of ten wake-ups a
    // second once anything was armed.
    lock.unlock();
    std::this_thread::sleep_for(kTick);
    lock.lock();
    const auto now = CoarseNow();
    for (WatchedCall* call = dog->head; call != nullptr; call = call->next) {
      if (call->state != kArmed && now >= call->end_at) {
        EndProcess(call->Describe() + " still has not returned " +
                   Seconds(std::chrono::duration_cast<std::chrono::milliseconds>(
                       call->end_at - call->late_at + call->limit)) +
                   " after it began (its limit: " + Seconds(call->limit) +
                   "), though it was told to stop when the limit passed. Ending this process "
                   "with exit status " +
                   std::to_string(kWatchdogExitStatus) +
                   " rather than hang the job: a call that ignores its time-out and its abort "
                   "cannot be waited for");
      }
      if (call->state == kArmed && now >= call->late_at) {
        call->state = kLateCalled;
        const std::string message = call->Describe() + " has not returned within " +
                                    Seconds(call->limit) + " (the watchdog's limit)";
        // On a thread of its own: an OnLate that blocks (a plugin's abort that never returns)
        // must not stop this thread from ending the process at end_at.
        std::thread([dog, call, message] {
          call->OnLate(message);
          std::lock_guard<std::mutex> done(dog->mutex);
          call->state = kLateDone;
          dog->late_done.notify_all();
        }).detach();
      }
    }
  }
}

}  // namespace

void WatchedCall::Arm(std::chrono::milliseconds limit_ms, std::chrono::milliseconds grace) {
  static std::once_flag at_fork;
  std::call_once(at_fork, [] { ::pthread_atfork(nullptr, nullptr, ResetInChild); });
  limit = limit_ms;
  late_at = CoarseNow() + limit_ms;
  end_at = late_at + grace;
  Watchdog* dog = g_watchdog;
  std::lock_guard<std::mutex> lock(dog->mutex);
  if (!dog->thread_started) {
    dog->thread_started = true;
    std::thread(RunWatchdog, dog).detach();
  }
  next = dog->head;
  if (next != nullptr) next->previous = this;
  dog->head = this;
}

void WatchedCall::Disarm() {
  Watchdog* dog = g_watchdog;
  std::unique_lock<std::mutex> lock(dog->mutex);
  dog->late_done.wait(lock, [&] { return state != kLateCalled; });
  if (previous != nullptr) {
    previous->next = next;
  } else if (dog->head == this) {
    dog->head = next;
  }
  if (next != nullptr) next->previous = previous;
}

std::chrono::milliseconds WatchdogLimitFor(std::chrono::milliseconds timeout) {
  return timeout + std::max(std::chrono::milliseconds(1000), timeout / 10);
}

}  // namespace chorus::internal
