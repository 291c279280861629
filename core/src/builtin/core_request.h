// The builtin plugin's request (plugin.h's chorus_request): one operation in flight, such as a
// send or receive of the core's tcp transport. Whoever finishes the operation completes it once
// (the endpoint's progress thread, or abort); the caller tests or waits on it through the
// builtin plugin table's request_test / request_wait and frees it with request_free.
//
// Shared ownership: the handle given across the ABI holds one reference and the endpoint holds
// another while the operation is pending, so freeing the handle of an aborted request, or
// destroying the endpoint before the handle is freed, never leaves either side with a dangling
// pointer.
//
// A request may carry a CallerProgress: then a wait first spins for a short while, moving the
// operation along on the caller's own thread, before it sleeps on the condition variable. Without
// it a message costs two thread hops (the progress thread wakes from poll(), then wakes the
// caller): about 50 us per 8-byte message on a 2-core VM, against 6-7 us with the spin. While a
// wait spins, and for kHandOver after one got its request so, the owner's progress thread stands
// back (ProgressThreadStandsBack): woken by the same socket, it would take the lock and a core
// from the spinning caller, and a ping-pong of 32 KiB took 70-80 us instead of 13-30 in some runs.
#ifndef CHORUS_CORE_CORE_REQUEST_H_
#define CHORUS_CORE_CORE_REQUEST_H_

#include <chorus/plugin.h>

#include <atomic>
#include <chorus/host_cpus.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

namespace chorus::internal {

// What a waiting caller may run to move operations along itself (a transport's non-blocking look
// at its sockets, which says whether it moved anything), and for how long it spins so after the
// last poll that moved something before it sleeps. `wake` wakes the owner's progress thread when
// it may be standing back and a wait is about to sleep. Its owner (the endpoint) detaches it
// before it goes away; requests that outlive the owner then just sleep.
class CallerProgress {
 public:
  static constexpr std::chrono::milliseconds kHandOver = sdk::CallerHandOver::kHandOver;

  CallerProgress(std::function<bool()> poll, std::chrono::microseconds spin,
                 std::function<void()> wake = {})
      : poll_(std::move(poll)), wake_(std::move(wake)), spin_(spin) {}

  // Runs the poll once (*moved: what it said); false (without running it) once detached.
  bool PollOnce(bool* moved = nullptr);
  // After it returns no poll or wake runs or will run. Waits for one in flight.
  void Detach();
  std::chrono::microseconds spin() const { return spin_; }

  // A wait's spin begins; it ends with EndSpin, saying whether the spin got its request.
  void BeginSpin();
  void EndSpin(bool got_request);
  // A wait sleeps without having spun (its request was not to spin): the progress thread must not
  // stand back for what is left of kHandOver.
  void WaitSleeps();
  // Whether the owner's progress thread should leave the sockets to the callers now.
  bool ProgressThreadStandsBack() const;

 private:
  void WakeOwner();

  std::shared_mutex mutex_;  // shared by the polls and wakes, exclusive for Detach
  std::function<bool()> poll_;
  std::function<void()> wake_;
  const std::chrono::microseconds spin_;
  std::atomic<int> spinning_{0};
  sdk::CallerHandOver hand_over_;  // when a spin last got its request; cleared: handed back
};

class CoreRequest {
 public:
  CoreRequest() = default;
  // `progress` may be null: waits then sleep at once. With spin false they sleep at once too, but
  // tell `progress` (so that the progress thread takes over).
  explicit CoreRequest(std::shared_ptr<CallerProgress> progress, bool spin = true)
      : progress_(std::move(progress)), spin_(spin) {}

  // Finishes the operation with `status`; the first call wins and later ones are ignored (an
  // abort racing a completion). Never blocks on anything but the request's own mutex.
  void Complete(chorus_status status, std::string message = {});

  // True when finished; then *status and *message hold the outcome.
  bool Test(chorus_status* status, std::string* message) const;

  // Waits up to timeout_ms (negative: no limit), first spinning on the CallerProgress (if any).
  // CHORUS_TIMEOUT when still pending (the operation stays live), else the operation's status
  // with *message set.
  chorus_status Wait(int64_t timeout_ms, std::string* message) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool done_ = false;
  std::atomic<bool> done_flag_{false};  // done_, read without the mutex by a spinning wait
  const std::shared_ptr<CallerProgress> progress_;
  const bool spin_ = true;
  chorus_status status_ = CHORUS_OK;
  std::string message_;
};

// A new handle owning one reference to `request`, for returning across the ABI.
chorus_request* NewRequestHandle(std::shared_ptr<CoreRequest> request);

// The builtin plugin table's request functions (plugin.h semantics; errors through
// sdk::LastError()).
chorus_status CoreRequestTest(chorus_request* request, int* done);
chorus_status CoreRequestWait(chorus_request* request, int64_t timeout_ms);
void CoreRequestFree(chorus_request* request);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_CORE_REQUEST_H_
