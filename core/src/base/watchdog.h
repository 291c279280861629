// A watchdog over calls that must return within a time-out, PyTorch c10d's way: a call into a
// plugin (a collective, its create, a plugin's entry point) is armed with a limit; if it has not
// returned when the limit passes, the watchdog's thread calls its `on_late` (a communicator
// aborts itself, which tells every plugin call to return), and if it still has not returned
// `grace` later, the process ends with kWatchdogExitStatus
// (chorus/base/exit_status.h) after printing what did not return.
// So a plugin that ignores its time-out and its abort cannot hang a job.
//
// Arming and disarming cost a coarse clock read and two atomic stores or exchanges on a slot of
// the calling thread's (no lock, no allocation, no system call): the watched call lives on the
// caller's stack, and the watchdog's thread (started by the first Arm) looks at every thread's
// slots every 100 ms. A thread has 8 slots, for calls armed inside armed calls; a call armed
// deeper than that is not watched (the calls around it are).
#ifndef CHORUS_BASE_WATCHDOG_H_
#define CHORUS_BASE_WATCHDOG_H_

#include <chorus/base/exit_status.h>

#include <chrono>
#include <string>
#include <utility>

namespace chorus::internal {

// How long an aborted call has to return before the process ends: the SDK asks a plugin to end
// its calls within 5 s of an abort.
inline constexpr std::chrono::milliseconds kWatchdogGrace{5000};

class WatchedCall {
 public:
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;

  // What is being waited for, in words ("all_reduce over gloo (plugin gloo) on worker 1").
  virtual std::string Describe() const = 0;
  // Called once, on a thread of the watchdog's, when the limit has passed; `message` says so.
  virtual void OnLate(const std::string& message) = 0;

  // The watchdog's bookkeeping (watchdog.cc).
  struct Slot;
  Slot* slot = nullptr;  // nullptr: not watched (armed too deep)
  std::chrono::milliseconds limit{0};

 protected:
  WatchedCall() = default;
  ~WatchedCall() = default;
  // Arm from the derived constructor and disarm from its destructor, so the watchdog never
  // calls Describe or OnLate on a half-built or half-destroyed object. Disarm waits for an
  // OnLate that is running.
  void Arm(std::chrono::milliseconds limit, std::chrono::milliseconds grace);
  void Disarm();
};

template <typename DescribeFn, typename OnLateFn>
class Watched final : public WatchedCall {
 public:
  Watched(std::chrono::milliseconds limit, std::chrono::milliseconds grace, DescribeFn describe,
          OnLateFn on_late)
      : describe_(std::move(describe)), on_late_(std::move(on_late)) {
    Arm(limit, grace);
  }
  ~Watched() { Disarm(); }
  std::string Describe() const override { return describe_(); }
  void OnLate(const std::string& message) override { on_late_(message); }

 private:
  DescribeFn describe_;
  OnLateFn on_late_;
};

// auto watch = Watch(limit, grace, [&] { return "..."; }, [&](const std::string& m) { ... });
template <typename DescribeFn, typename OnLateFn>
Watched<DescribeFn, OnLateFn> Watch(std::chrono::milliseconds limit,
                                    std::chrono::milliseconds grace, DescribeFn describe,
                                    OnLateFn on_late) {
  return Watched<DescribeFn, OnLateFn>(limit, grace, std::move(describe), std::move(on_late));
}

// The limit for a call that the plugin itself bounds by `timeout`: a little more, so that the
// plugin's own time-out (with its better message) ends it first.
std::chrono::milliseconds WatchdogLimitFor(std::chrono::milliseconds timeout);

}  // namespace chorus::internal

#endif  // CHORUS_BASE_WATCHDOG_H_
