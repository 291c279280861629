// MpiCommunicator: a chorus communicator over a duplicate of MPI_COMM_WORLD.
//
// The first create initialises MPI (MPI_THREAD_MULTIPLE when the library offers it) unless the
// application did; the plugin then finalizes MPI at process exit. The chorus rank and size must
// be MPI_COMM_WORLD's: the processes must have been started by mpirun (or srun). Operations use
// MPI's non-blocking collectives and complete before they return: the plugin polls MPI_Test
// until the operation is done, its time-out passes (CHORUS_TIMEOUT) or abort() is called
// (CHORUS_ABORTED). MPI cannot cancel a started collective, so after either the communicator is
// unusable.
#ifndef CHORUS_MPI_MPI_COMMUNICATOR_H_
#define CHORUS_MPI_MPI_COMMUNICATOR_H_

#include <chorus/plugin.h>
#include <mpi.h>

#include <atomic>
#include <string>

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
  // Polls `request` to completion within the time-out; throws sdk::Error otherwise.
  void Wait(MPI_Request* request, int start_code, const char* what);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int64_t timeout_ms_ = 0;
  std::atomic<bool> aborted_{false};
  std::string broken_;  // why the communicator cannot be used any more
};

}  // namespace chorus::mpi

#endif  // CHORUS_MPI_MPI_COMMUNICATOR_H_
