#include "base/watchdog.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>

#include "base/logging.h"

namespace chorus::internal {

// One armed call of one thread. Its word holds the call's sequence number (bits 3 and up) and
// state (bits 0-2); every change of state is a compare-exchange of the whole word, so a change
// meant for an earlier call of the same slot fails. Who may move a state on:
//   kFree -> kArmed                   the owner (Arm)
//   kArmed, kLateDone -> kFree        the owner (Disarm)
//   kArmed -> kLateRunning            the watchdog's thread: OnLate runs on a thread of its own,
//   kLateRunning -> kLateDone         which ends it
//   kLateRunning, kLateDone -> kEnding the watchdog's thread, which then ends the process
// While the state is kLateRunning or kEnding the owner cannot leave Disarm, so the call object
// lives while the watchdog uses it.
struct WatchedCall::Slot {
  std::atomic<uint64_t> word{0};
  std::atomic<int64_t> late_at_ns{0};
  std::atomic<int64_t> end_at_ns{0};
  std::atomic<WatchedCall*> call{nullptr};
};

namespace {

enum State : uint64_t { kFree = 0, kArmed = 1, kLateRunning = 2, kLateDone = 3, kEnding = 4 };
constexpr uint64_t kStateBits = 7;

constexpr State StateOf(uint64_t word) { return static_cast<State>(word & kStateBits); }
constexpr uint64_t With(uint64_t word, State state) { return (word & ~kStateBits) | state; }

constexpr auto kTick = std::chrono::milliseconds(100);
constexpr int kSlotsPerThread = 8;

// CLOCK_MONOTONIC_COARSE: within a few milliseconds, read in a few nanoseconds instead of tens.
int64_t CoarseNowNs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// A thread's slots. Never freed: a thread that ends hands its slots back for the next thread,
// and an OnLate thread may still touch a slot after its owner went on.
struct ThreadSlots {
  WatchedCall::Slot slots[kSlotsPerThread];
  int depth = 0;  // the owner thread's only
  bool in_use = false;
  ThreadSlots* next = nullptr;
};

struct Watchdog {
  std::mutex mutex;  // guards the list and in_use, not the slots
  ThreadSlots* all = nullptr;
  bool thread_started = false;
};

// Never destroyed: the thread runs until the process ends, and calls may be armed while static
// objects are destroyed at exit.
Watchdog* g_watchdog = new Watchdog();

// A child of fork() has none of the parent's threads: it starts with an empty watchdog.
void ResetInChild();

std::string Seconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ns) / 1e9);
  return text;
}

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

void Look(WatchedCall::Slot& slot, int64_t now) {
  uint64_t word = slot.word.load(std::memory_order_acquire);
  const State state = StateOf(word);
  if (state == kArmed && now >= slot.late_at_ns.load(std::memory_order_relaxed)) {
    if (!slot.word.compare_exchange_strong(word, With(word, kLateRunning))) return;
    WatchedCall* call = slot.call.load(std::memory_order_relaxed);
    const std::string message = call->Describe() + " has not returned within " +
                                Seconds(call->limit.count() * 1000000) + " (the watchdog's limit)";
    // On a thread of its own: an OnLate that blocks (a plugin's abort that never returns) must
    // not keep this thread from ending the process at end_at.
    std::thread([&slot, call, message, word] {
      call->OnLate(message);
      uint64_t running = With(word, kLateRunning);
      slot.word.compare_exchange_strong(running, With(word, kLateDone));
      slot.word.notify_all();
    }).detach();
    return;
  }
  if ((state == kLateRunning || state == kLateDone) &&
      now >= slot.end_at_ns.load(std::memory_order_relaxed)) {
    if (!slot.word.compare_exchange_strong(word, With(word, kEnding))) return;
    const WatchedCall* call = slot.call.load(std::memory_order_relaxed);
    const int64_t began = slot.late_at_ns.load() - call->limit.count() * 1000000;
    EndProcess(call->Describe() + " still has not returned " + Seconds(now - began) +
               " after it began (its limit: " + Seconds(call->limit.count() * 1000000) +
               "), though it was told to stop when the limit passed. Ending this process with "
               "exit status " +
               std::to_string(kWatchdogExitStatus) +
               " rather than hang the job: a call that ignores its time-out and its abort cannot "
               "be waited for");
  }
}

void RunWatchdog(Watchdog* dog) {
  for (;;) {
    std::this_thread::sleep_for(kTick);
    std::lock_guard<std::mutex> lock(dog->mutex);
    const int64_t now = CoarseNowNs();
    for (ThreadSlots* slots = dog->all; slots != nullptr; slots = slots->next) {
      for (WatchedCall::Slot& slot : slots->slots) Look(slot, now);
    }
  }
}

// Hands a thread's slots back when it ends.
struct ThreadSlotsOwner {
  ThreadSlots* slots = nullptr;
  ~ThreadSlotsOwner() {
    if (slots == nullptr) return;
    std::lock_guard<std::mutex> lock(g_watchdog->mutex);
    slots->in_use = false;
  }
};

thread_local ThreadSlotsOwner t_slots;

ThreadSlots& SlotsOfThisThread() {
  if (t_slots.slots != nullptr) return *t_slots.slots;
  static std::once_flag at_fork;
  std::call_once(at_fork, [] { ::pthread_atfork(nullptr, nullptr, ResetInChild); });
  Watchdog* dog = g_watchdog;
  std::lock_guard<std::mutex> lock(dog->mutex);
  if (!dog->thread_started) {
    dog->thread_started = true;
    std::thread(RunWatchdog, dog).detach();
  }
  ThreadSlots* slots = dog->all;
  while (slots != nullptr && slots->in_use) slots = slots->next;
  if (slots == nullptr) {
    slots = new ThreadSlots();
    slots->next = dog->all;
    dog->all = slots;
  }
  slots->in_use = true;
  slots->depth = 0;
  t_slots.slots = slots;
  return *slots;
}

void ResetInChild() {
  g_watchdog = new Watchdog();
  // The forking thread's slots belong to the parent's list; its calls in the child are not
  // watched until it arms from a fresh list.
  t_slots.slots = nullptr;
}

}  // namespace

void WatchedCall::Arm(std::chrono::milliseconds limit_ms, std::chrono::milliseconds grace) {
  limit = limit_ms;
  ThreadSlots& slots = SlotsOfThisThread();
  if (slots.depth >= kSlotsPerThread) return;  // not watched; the calls around it are
  slot = &slots.slots[slots.depth++];
  const int64_t late_at = CoarseNowNs() + limit_ms.count() * 1000000;
  slot->late_at_ns.store(late_at, std::memory_order_relaxed);
  slot->end_at_ns.store(late_at + grace.count() * 1000000, std::memory_order_relaxed);
  slot->call.store(this, std::memory_order_relaxed);
  const uint64_t word = slot->word.load(std::memory_order_relaxed);
  slot->word.store(With(word + (kStateBits + 1), kArmed), std::memory_order_release);
}

void WatchedCall::Disarm() {
  if (slot == nullptr) return;
  uint64_t word = slot->word.load(std::memory_order_relaxed);
  for (;;) {
    const State state = StateOf(word);
    if (state == kArmed || state == kLateDone) {
      if (slot->word.compare_exchange_weak(word, With(word, kFree), std::memory_order_acq_rel)) {
        break;
      }
      continue;
    }
    // kLateRunning: OnLate runs on this call; kEnding: the process is about to end.
    slot->word.wait(word, std::memory_order_acquire);
    word = slot->word.load(std::memory_order_acquire);
  }
  // The slot is this thread's last armed one (calls nest), unless a fork() in between gave the
  // thread fresh slots.
  ThreadSlots* mine = t_slots.slots;
  if (mine != nullptr && slot >= mine->slots && slot < mine->slots + kSlotsPerThread) {
    --mine->depth;
  }
}

std::chrono::milliseconds WatchdogLimitFor(std::chrono::milliseconds timeout) {
  return timeout + std::max(std::chrono::milliseconds(1000), timeout / 10);
}

}  // namespace chorus::internal
