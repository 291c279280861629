// What the host's abort_requested() answers (plugin.h): the core raises an AbortFlag to stop the
// work of one communicator or cross-device ops (a lost peer, a time-out, a strategy destroyed with
// work pending), and every call the core makes into a plugin for that object runs inside an
// AbortScope of its flag. A plugin's long wait on that thread then sees the flag through the
// host's abort_requested, which answers for the calling thread: its scopes (nested, when a plugin
// composes another collective inside an operation) and the process-wide flag.
//
// Why per thread and not one flag for the process: one communicator's time-out must not fail
// every other communicator of the process (ranks as threads, two strategies, a job restarted in
// the same process).
#ifndef CHORUS_CORE_BASE_ABORT_SCOPE_H_
#define CHORUS_CORE_BASE_ABORT_SCOPE_H_

#include <atomic>

namespace chorus::internal {

class AbortFlag {
 public:
  void Raise() { raised_.store(true, std::memory_order_release); }
  bool raised() const { return raised_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> raised_{false};
};

// While alive, the calling thread works for `flag` (inside whatever scope was current). Scopes
// are strictly nested on a thread. `flag` must outlive the scope.
class AbortScope {
 public:
  explicit AbortScope(const AbortFlag& flag);
  ~AbortScope();
  AbortScope(const AbortScope&) = delete;
  AbortScope& operator=(const AbortScope&) = delete;

 private:
  friend bool AbortRequested();
  const AbortFlag& flag_;
  const AbortScope* parent_;
};

// True once the process-wide flag, or the flag of any scope of the calling thread, is raised.
bool AbortRequested();
// Raises the process-wide flag: every plugin wait, on every thread, ends (chorus::RequestAbort).
void RaiseProcessAbort();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_BASE_ABORT_SCOPE_H_
