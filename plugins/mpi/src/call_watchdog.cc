#include "call_watchdog.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstdio>

namespace chorus::mpi {

CallWatchdog::CallWatchdog(MPI_Comm comm, int64_t timeout_ms, std::string where, EndBy end_by)
    : comm_(comm), timeout_ms_(timeout_ms), where_(std::move(where)), end_by_(end_by) {
  thread_ = std::thread([this] { Watch(); });
}

CallWatchdog::~CallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

CallWatchdog::Call::Call(CallWatchdog& watchdog, const char* what) : watchdog_(watchdog) {
  watchdog_.what_.store(what, std::memory_order_relaxed);
  watchdog_.calls_.store(watchdog_.calls_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
}

CallWatchdog::Call::~Call() {
  watchdog_.calls_.store(watchdog_.calls_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
}

void CallWatchdog::Watch() {
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::milliseconds(std::clamp<int64_t>(timeout_ms_ / 10, 10, 1000));
  uint64_t seen = 0;            // the value of calls_ at the last wake-up
  Clock::time_point seen_at{};  // when the call in flight then was first seen
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    const uint64_t calls = calls_.load(std::memory_order_acquire);
    const auto now = Clock::now();
    if (calls % 2 == 0) continue;  // none in flight
    if (calls != seen) {           // another call than last time: it began at most a period ago
      seen = calls;
      seen_at = now;
      continue;
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - seen_at).count();
    if (waited >= timeout_ms_) EndJob(what_.load(std::memory_order_relaxed), waited);
  }
}

void CallWatchdog::EndJob(const char* what, int64_t waited_ms) {
  const std::string message =
      std::string(what) + " (" + where_ + ") did not finish within its time-out of " +
      std::to_string(timeout_ms_) + " ms (in flight for at least " + std::to_string(waited_ms) +
      " ms; is every rank issuing the same operations?). MPI cannot cancel a blocking "
      "collective: the mpi plugin ends the job " +
      (end_by_ == EndBy::kMpiAbort
           ? std::string("with MPI_Abort")
           : std::string("by ending this process (MPI's thread level is below "
                         "MPI_THREAD_MULTIPLE, so this thread may not call MPI_Abort; mpirun "
                         "stops the other processes)")) +
      " (exit status " + std::to_string(kTimedOutExitCode) + ")";
  if (sdk::LogEnabled(CHORUS_LOG_ERROR)) {
    sdk::Log(CHORUS_LOG_ERROR, message);
  } else {  // the job ends: say why even when the host logs nothing
    std::fprintf(stderr, "chorus mpi: %s\n", message.c_str());
    std::fflush(stderr);
  }
  if (end_by_ == EndBy::kMpiAbort) MPI_Abort(comm_, kTimedOutExitCode);
  // MPI_Abort does not return; should it, the process still ends. A process that ends without
  // MPI_Finalize makes mpirun end the job.
  std::_Exit(kTimedOutExitCode);
}

}  // namespace chorus::mpi
