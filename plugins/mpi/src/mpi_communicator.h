// MpiCommunicator: a chorus communicator over a duplicate of MPI_COMM_WORLD.
//
// The first create initialises MPI (at the level CHORUS_MPI_THREAD_LEVEL names: MPI_THREAD_MULTIPLE
// by default, or serialized or single, where every MPI call takes the plugin's process lock)
// unless the application did; the plugin then finalizes MPI at process exit. The chorus rank and
// size must be MPI_COMM_WORLD's: the processes must have been started by mpirun (or srun).
// Operations call MPI's blocking collectives (MPI_Allreduce, ...) on the calling thread, as an MPI
// program does: Open MPI's tuned algorithms and its own progress loop, no copies (in place is
// MPI_IN_PLACE). A blocking call cannot be interrupted: a CallWatchdog ends the job when one runs
// past the time-out (CHORUS_TIMEOUT's bound), and abort() fails the call in flight with
// CHORUS_ABORTED when it returns and every later call at once (README, Semantics).
#ifndef CHORUS_MPI_MPI_COMMUNICATOR_H_
#define CHORUS_MPI_MPI_COMMUNICATOR_H_

#include <chorus/plugin.h>
#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "call_watchdog.h"

namespace chorus::mpi {

class MpiCommunicator {
 public:
  explicit MpiCommunicator(const chorus_communicator_create_args& args);  // throws sdk::Error
  ~MpiCommunicator();

  void AllReduce(const chorus_all_reduce_args& args);
  void Broadcast(const chorus_collective_broadcast_args& args);
  void AllGather(const chorus_collective_all_gather_args& args);
  void ReduceScatter(const chorus_reduce_scatter_args& args);
  void Barrier();
  void Abort() { aborted_.store(true); }

 private:
  void Begin(const char* what);
  // Makes the blocking MPI call `mpi_call` (returning MPI's code) under the watchdog, then
  // throws sdk::Error when it failed or the communicator was aborted meanwhile.
  // Below MPI_THREAD_MULTIPLE the call first takes the process's MPI lock; the watchdog bounds
  // that wait too.
  template <typename MpiCall>
  void Run(const char* what, MpiCall mpi_call) {
    int code;
    {
      CallWatchdog::Call in_flight(*watchdog_, what);
      std::unique_lock<std::timed_mutex> serial(SerialMutex(), std::defer_lock);
      if (serialized_) serial.lock();
      code = mpi_call();
    }
    Ended(code, what);
  }
  // Every MPI call of the process takes turns under it when MPI's thread level is below
  // MPI_THREAD_MULTIPLE (CHORUS_MPI_THREAD_LEVEL=serialized, or an application's MPI_Init).
  static std::timed_mutex& SerialMutex();
  void Ended(int code, const char* what);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int64_t timeout_ms_ = 0;
  bool serialized_ = false;  // MPI's thread level is below MPI_THREAD_MULTIPLE
  std::atomic<bool> aborted_{false};
  std::unique_ptr<CallWatchdog> watchdog_;
  std::string broken_;  // why the communicator cannot be used any more
};

}  // namespace chorus::mpi

#endif  // CHORUS_MPI_MPI_COMMUNICATOR_H_
