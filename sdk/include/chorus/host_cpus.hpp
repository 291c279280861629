// What waits that spin on the caller's thread share:
//  - MoreRanksThanCpus: the rule by which a plugin's waits stop spinning. A rank that spins while
//    its host runs more of the job's ranks than this process may run on holds the core the rank
//    it waits for needs. The ucx and ofi transports then poll with sched_yield() between polls
//    from the start of a wait (a sleeping wait answers a time slice late: 4 ranks on 2 cores ran
//    their collectives 1.2-2.4x faster than sleeping at once, medians of six rounds at
//    64 KiB-1 MiB), so does shm (a spin of 50 us first made 4 ranks on 2 cores 1.2-1.8x slower),
//    and the core's tcp transport sleeps at once (yielding made its collectives 20-40% slower
//    from 1 MiB there).
//  - CallerHandOver: when a spinning wait last got its request by serving the transport itself,
//    for a progress thread that stands back a moment after (the core's tcp, ucx, ofi).
// Header-only, C++17, Linux.
#ifndef CHORUS_SDK_HOST_CPUS_HPP_
#define CHORUS_SDK_HOST_CPUS_HPP_

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace chorus::sdk {

// Whether `ranks_on_this_host` (this process's rank among them) outnumber the cpus this process
// may run on (sched_getaffinity). False when the affinity cannot be read.
inline bool MoreRanksThanCpus(long ranks_on_this_host) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < ranks_on_this_host;
}

// When a waiting caller last got its request by serving the transport on its own thread
// (polling its sockets, reading its completion queue, progressing its worker). A progress thread
// that would compete with such callers for the transport's lock and a core stands back while
// Recent(): a loop's next wait is about to serve itself again. A wait that goes to sleep hands
// the transport back at once (Clear). Thread-safe; relaxed, since it only steers who polls.
class CallerHandOver {
 public:
  static constexpr std::chrono::milliseconds kHandOver{1};

  void Mark(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    last_ns_.store(Ns(now), std::memory_order_relaxed);
  }
  // Ends the hand-over now; whether one was pending.
  bool Clear() { return last_ns_.exchange(0, std::memory_order_relaxed) != 0; }
  // Whether a caller got its request so within the last kHandOver (and nobody cleared it since).
  bool Recent() const {
    const int64_t last = last_ns_.load(std::memory_order_relaxed);
    return last != 0 && Ns(std::chrono::steady_clock::now()) - last <
                            std::chrono::nanoseconds(kHandOver).count();
  }

 private:
  static int64_t Ns(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  std::atomic<int64_t> last_ns_{0};
};

}  // namespace chorus::sdk

#endif  // CHORUS_SDK_HOST_CPUS_HPP_
