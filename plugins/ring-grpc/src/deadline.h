// A point in time a wait gives up at; "never" for a negative time-out.
#ifndef CHORUS_PLUGINS_RING_GRPC_DEADLINE_H_
#define CHORUS_PLUGINS_RING_GRPC_DEADLINE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace chorus::ring_grpc {

// How often a blocked wait of the inbox or outbox looks at the abort flag.
inline constexpr std::chrono::milliseconds kAbortPoll{100};

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // timeout_ms < 0: no deadline.
  static Deadline After(int64_t timeout_ms) {
    Deadline d;
    if (timeout_ms >= 0) {
      // Capped at a year, so that the addition cannot overflow.
      const int64_t capped = std::min<int64_t>(timeout_ms, int64_t{365} * 24 * 3600 * 1000);
      d.at_ = Clock::now() + std::chrono::milliseconds(capped);
      d.never_ = false;
    }
    return d;
  }

  bool expired() const { return !never_ && Clock::now() >= at_; }

  // When a wait that also polls every `poll` should wake next.
  Clock::time_point NextWake(std::chrono::milliseconds poll) const {
    const Clock::time_point next = Clock::now() + poll;
    return never_ ? next : std::min(next, at_);
  }

  // Milliseconds left (0 when expired), or -1 for none.
  int64_t remaining_ms() const {
    if (never_) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now());
    return std::max<int64_t>(0, left.count());
  }

 private:
  bool never_ = true;
  Clock::time_point at_{};
};

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_DEADLINE_H_
