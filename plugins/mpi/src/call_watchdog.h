// CallWatchdog: bounds the blocking MPI calls of one communicator by its time-out.
//
// A blocking collective (MPI_Allreduce, ...) cannot be interrupted or cancelled, and Open MPI 4
// has no fault tolerance that would make it return when a peer stays away. The watchdog is a
// thread that sleeps, waking every tenth of the time-out (10 ms to 1 s); when it has seen the same
// call in flight for longer than the time-out it logs why and ends the job: MPI_Abort on the
// communicator, which makes mpirun stop every process of the job (exit status 124); below
// MPI_THREAD_MULTIPLE, where its thread may not call MPI, the process exits with 124 and mpirun
// stops the others (a process that ends without MPI_Finalize ends its job). So a rank
// that never joins costs at most the time-out plus one wake-up period, never a hang. A call costs
// two plain stores (a counter, odd while a call is in flight): no clock read, no lock, nothing
// that wakes the thread, so that small operations pay nothing measurable for it.
#ifndef CHORUS_MPI_CALL_WATCHDOG_H_
#define CHORUS_MPI_CALL_WATCHDOG_H_

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace chorus::mpi {

// mpirun's exit status when the watchdog ends a job (as timeout(1)).
inline constexpr int kTimedOutExitCode = 124;

class CallWatchdog {
 public:
  // How the watchdog ends the job: MPI_Abort from its thread (MPI_THREAD_MULTIPLE), or this
  // process's exit, which needs no MPI call.
  enum class EndBy { kMpiAbort, kExit };

  // `where` names the communicator in the message ("rank 0 of 2"); `comm` is what MPI_Abort ends.
  CallWatchdog(MPI_Comm comm, int64_t timeout_ms, std::string where, EndBy end_by);
  ~CallWatchdog();  // stops and joins the thread
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // Marks the calling thread as inside the blocking call `what` (static string) until the
  // returned guard goes.
  class Call {
   public:
    Call(CallWatchdog& watchdog, const char* what);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    CallWatchdog& watchdog_;
  };

 private:
  void Watch();
  [[noreturn]] void EndJob(const char* what, int64_t waited_ms);

  MPI_Comm comm_;
  const int64_t timeout_ms_;
  const std::string where_;
  const EndBy end_by_;
  // Calls begun plus calls ended: odd while one is in flight. Written by the calling thread only
  // (operations of one communicator do not overlap), read by the watchdog.
  std::atomic<uint64_t> calls_{0};
  std::atomic<const char*> what_{""};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace chorus::mpi

#endif  // CHORUS_MPI_CALL_WATCHDOG_H_
