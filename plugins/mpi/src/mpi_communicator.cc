#include "mpi_communicator.h"

#include <dlfcn.h>

#include <chorus/plugin_sdk.hpp>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "datatypes.h"
#include "mpi_errors.h"

namespace chorus::mpi {
namespace {

using sdk::Fail;

std::mutex g_init_mutex;

// The level the plugin asks of MPI_Init_thread: CHORUS_MPI_THREAD_LEVEL, `multiple` (the
// default), `serialized` or `single`. Read at every create, so that a wrong value is an error
// even after MPI is initialised. Open MPI 4 turns its locks on at any level above
// MPI_THREAD_SINGLE (opal_set_using_threads), so only `single` gives a plain MPI program's speed
// there; the plugin then still makes every MPI call under its process lock.
int WantedThreadLevel() {
  const char* value = std::getenv("CHORUS_MPI_THREAD_LEVEL");
  const std::string_view level = value == nullptr ? "" : value;
  if (level.empty() || level == "multiple") return MPI_THREAD_MULTIPLE;
  if (level == "serialized") return MPI_THREAD_SERIALIZED;
  if (level == "single") return MPI_THREAD_SINGLE;
  Fail(CHORUS_INVALID_ARGUMENT, "mpi: CHORUS_MPI_THREAD_LEVEL is '", level,
       "'; use 'multiple' (the default: MPI_THREAD_MULTIPLE), 'serialized' or 'single' (MPI's "
       "lower levels: the plugin's MPI calls take turns, one communicator in a collective at a "
       "time; 'single' is what makes Open MPI drop its locks)");
}

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// MPI_Init_thread unless someone (the application, an earlier communicator) already did.
void EnsureInitialized() {
  const int wanted = WantedThreadLevel();
  std::lock_guard<std::mutex> lock(g_init_mutex);
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    Fail(CHORUS_UNAVAILABLE, "mpi: MPI was finalized already and cannot be initialised again");
  }
  if (!initialized) {
    // The core loads plugins with local symbols; Open MPI's own components need libmpi's
    // symbols global, or MPI_Init fails to load them.
    for (const char* name : {"libmpi.so.40", "libmpi.so"}) {
      if (dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) break;
    }
    int provided = 0;
    const int code = MPI_Init_thread(nullptr, nullptr, wanted, &provided);
    if (code != MPI_SUCCESS) {
      Fail(CHORUS_UNAVAILABLE, "mpi: MPI_Init_thread failed: ", ErrorText(code));
    }
    std::atexit(FinalizeAtExit);
    if (provided < wanted) {
      sdk::Log(CHORUS_LOG_WARN, "mpi: the MPI library offers thread level " +
                                    std::to_string(provided) + " only, below the " +
                                    std::to_string(wanted) +
                                    " asked; the plugin's MPI calls take turns");
    }
  }
  InitDatatypes();
}

int Count(size_t count, const char* what) {
  if (count > static_cast<size_t>(INT_MAX)) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": count ", count,
         " exceeds MPI's int counts (at most 2147483647 elements)");
  }
  return static_cast<int>(count);
}

void RequireData(const void* p, size_t count, const char* what, const char* name) {
  if (count > 0 && p == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": ", name, " is NULL");
}

}  // namespace

std::timed_mutex& MpiCommunicator::SerialMutex() {
  static std::timed_mutex mutex;
  return mutex;
}

MpiCommunicator::MpiCommunicator(const chorus_communicator_create_args& args)
    : timeout_ms_(args.timeout_ms) {
  if (args.size < 1 || args.rank < 0 || args.rank >= args.size) {
    Fail(CHORUS_INVALID_ARGUMENT, "mpi create: rank ", args.rank, " of size ", args.size,
         " is not a rank (0 <= rank < size)");
  }
  if (args.timeout_ms <= 0) Fail(CHORUS_INVALID_ARGUMENT, "mpi create: timeout_ms must be > 0");
  if (args.devices_api != nullptr) {
    Fail(CHORUS_UNSUPPORTED, "mpi: buffers on '", args.devices_api->platform,
         "' devices are not supported; the mpi collective works on host memory");
  }
  if (args.num_options > 0 && args.options == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "mpi create: num_options is ", args.num_options,
         " but options is NULL");
  }
  for (size_t i = 0; i < args.num_options; ++i) {
    Fail(CHORUS_INVALID_ARGUMENT, "mpi: unknown option '",
         args.options[i].key == nullptr ? "" : args.options[i].key, "'; this plugin takes none");
  }
  EnsureInitialized();
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);  // callable from any thread at any time
  serialized_ = provided < MPI_THREAD_MULTIPLE;
  // Below MPI_THREAD_MULTIPLE every MPI call of the process goes under one lock; another
  // communicator's collective may hold it (the creates of one job run in the same order, so
  // this waits for that collective to end, bounded by the time-out).
  std::unique_lock<std::timed_mutex> serial(SerialMutex(), std::defer_lock);
  if (serialized_ && !serial.try_lock_for(std::chrono::milliseconds(args.timeout_ms))) {
    Fail(CHORUS_TIMEOUT, "mpi create: another communicator's MPI call held MPI for longer than ",
         "the time-out of ", args.timeout_ms, " ms (MPI's thread level here is below ",
         "MPI_THREAD_MULTIPLE, so calls take turns; CHORUS_MPI_THREAD_LEVEL=multiple lifts that)");
  }
  int world_rank = 0;
  int world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_rank != args.rank || world_size != args.size) {
    Fail(CHORUS_INVALID_ARGUMENT, "mpi: this process is rank ", world_rank, " of ", world_size,
         " in MPI_COMM_WORLD but chorus asked for rank ", args.rank, " of ", args.size,
         "; the mpi collective needs every worker started by mpirun (or srun) as one job, e.g. "
         "mpirun -n ",
         args.size, " my_trainer");
  }
  Check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  rank_ = world_rank;
  size_ = world_size;
  // Below MPI_THREAD_MULTIPLE the watchdog's thread may not call MPI_Abort: it ends the process.
  watchdog_ = std::make_unique<CallWatchdog>(
      comm_, timeout_ms_, "rank " + std::to_string(rank_) + " of " + std::to_string(size_),
      serialized_ ? CallWatchdog::EndBy::kExit : CallWatchdog::EndBy::kMpiAbort);
}

MpiCommunicator::~MpiCommunicator() {
  watchdog_.reset();
  // A communicator whose collective failed may be left with it in flight and cannot be freed
  // safely; leave it to MPI_Finalize. So too when another communicator's call holds MPI.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ == MPI_COMM_NULL || !broken_.empty() || finalized) return;
  std::unique_lock<std::timed_mutex> serial(SerialMutex(), std::defer_lock);
  if (serialized_ && !serial.try_lock_for(std::chrono::milliseconds(timeout_ms_))) return;
  MPI_Comm_free(&comm_);
}

void MpiCommunicator::Begin(const char* what) {
  if (!broken_.empty()) {
    Fail(CHORUS_ABORTED, what, " (rank ", rank_, " of ", size_, "): the communicator is unusable (",
         broken_, "); destroy it and create a new one");
  }
  if (aborted_.load()) {
    broken_ = "it was aborted";
    Fail(CHORUS_ABORTED, what, " (rank ", rank_, " of ", size_, "): the communicator was aborted");
  }
}

void MpiCommunicator::Ended(int code, const char* what) {
  if (code != MPI_SUCCESS) {
    broken_ = ErrorText(code);
    Fail(CHORUS_PEER_LOST, what, " (rank ", rank_, " of ", size_, "): MPI: ", broken_);
  }
  // abort() cannot interrupt a blocking call; the call in flight fails when it returns. (The
  // core calls abort() when it raises its abort flag, so the flag need not be asked here.)
  if (aborted_.load(std::memory_order_relaxed)) {
    broken_ = "it was aborted with a collective in flight";
    Fail(CHORUS_ABORTED, what, " (rank ", rank_, " of ", size_,
         "): the communicator was aborted while the operation was in flight");
  }
}

void MpiCommunicator::AllReduce(const chorus_all_reduce_args& a) {
  sdk::RequireDtype(a.dtype, "mpi all_reduce");
  const MPI_Op op = OpOf(a.op, a.dtype);
  RequireData(a.send, a.count, "mpi all_reduce", "send");
  RequireData(a.recv, a.count, "mpi all_reduce", "recv");
  const int count = Count(a.count, "mpi all_reduce");
  Begin("mpi all_reduce");
  if (count == 0) return;
  const void* send = a.send == a.recv ? MPI_IN_PLACE : a.send;
  Run("mpi all_reduce",
      [&] { return MPI_Allreduce(send, a.recv, count, DatatypeOf(a.dtype), op, comm_); });
}

void MpiCommunicator::Broadcast(const chorus_collective_broadcast_args& a) {
  sdk::RequireDtype(a.dtype, "mpi broadcast");
  RequireData(a.data, a.count, "mpi broadcast", "data");
  if (a.root < 0 || a.root >= size_) {
    Fail(CHORUS_INVALID_ARGUMENT, "mpi broadcast: root ", a.root, " is not a rank of ", size_);
  }
  const int count = Count(a.count, "mpi broadcast");
  Begin("mpi broadcast");
  if (count == 0) return;
  Run("mpi broadcast",
      [&] { return MPI_Bcast(a.data, count, DatatypeOf(a.dtype), a.root, comm_); });
}

void MpiCommunicator::AllGather(const chorus_collective_all_gather_args& a) {
  sdk::RequireDtype(a.dtype, "mpi all_gather");
  RequireData(a.send, a.count, "mpi all_gather", "send");
  RequireData(a.recv, a.count, "mpi all_gather", "recv");
  const int count = Count(a.count, "mpi all_gather");
  Count(a.count * static_cast<size_t>(size_), "mpi all_gather");
  Begin("mpi all_gather");
  if (count == 0) return;
  const MPI_Datatype type = DatatypeOf(a.dtype);
  // In place as MPI has it: this rank's input already is its block of the output.
  const size_t block = a.count * chorus_dtype_size(a.dtype);
  const void* send = a.send == static_cast<const char*>(a.recv) + block * static_cast<size_t>(rank_)
                         ? MPI_IN_PLACE
                         : a.send;
  Run("mpi all_gather",
      [&] { return MPI_Allgather(send, count, type, a.recv, count, type, comm_); });
}

void MpiCommunicator::ReduceScatter(const chorus_reduce_scatter_args& a) {
  sdk::RequireDtype(a.dtype, "mpi reduce_scatter");
  const MPI_Op op = OpOf(a.op, a.dtype);
  RequireData(a.send, a.recv_count, "mpi reduce_scatter", "send");
  RequireData(a.recv, a.recv_count, "mpi reduce_scatter", "recv");
  const int count = Count(a.recv_count, "mpi reduce_scatter");
  Count(a.recv_count * static_cast<size_t>(size_), "mpi reduce_scatter");
  Begin("mpi reduce_scatter");
  if (count == 0) return;
  Run("mpi reduce_scatter", [&] {
    return MPI_Reduce_scatter_block(a.send, a.recv, count, DatatypeOf(a.dtype), op, comm_);
  });
}

void MpiCommunicator::Barrier() {
  Begin("mpi barrier");
  Run("mpi barrier", [&] { return MPI_Barrier(comm_); });
}

}  // namespace chorus::mpi
