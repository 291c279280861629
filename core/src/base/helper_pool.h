// The process's helper threads for the core's parallel loops (the host all-reduce), and a door
// for threads that would otherwise spin: a replica waiting in a rendezvous for the one that runs
// the merge joins the merge's loop instead (JoinAsGuest), at no wake-up cost.
//
// Run(threads, work) publishes work(), wakes up to threads - 1 helpers, calls work() itself and
// returns when every thread that entered work() has left it. work() must be safe to run on any
// number of threads at once (it takes its pieces from a shared counter) and must catch its own
// exceptions. Calls of Run from several threads take turns, but one that asks for no helper runs
// at once, alone, when another holds the pool.
#ifndef CHORUS_CORE_BASE_HELPER_POOL_H_
#define CHORUS_CORE_BASE_HELPER_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace chorus::internal {

class HelperPool {
 public:
  static HelperPool& Get();

  void Run(unsigned threads, const std::function<void()>& work);

  // Enters the published work once, if there is work this thread has not entered yet; returns
  // whether it did. Cheap when there is none (one atomic load).
  bool JoinAsGuest();

  ~HelperPool();

 private:
  HelperPool() = default;
  void Loop(uint64_t seen);

  std::mutex turn_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void()>* work_ = nullptr;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> open_generation_{0};  // generation_ while guests may enter, else 0
  unsigned wanted_ = 0;                       // helpers still to pick up this generation's work
  // Helpers and guests of this generation not yet done; changed under mutex_, read without it.
  std::atomic<unsigned> running_{0};
  bool stopping_ = false;
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_BASE_HELPER_POOL_H_
