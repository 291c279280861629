// ShmCommunicator: one rank of a shared-memory collective.
//
// Every operation is cut into rounds of at most chunk_bytes per rank; round k uses each rank's
// data buffer k % 2. A round is: copy in, barrier, [reduce this rank's slice, barrier,] copy out.
// A barrier is each rank raising its phase counter and waiting until every rank's counter has
// reached the same value. Double buffering makes the next round safe without a third barrier: a
// rank writes buffer k % 2 again only in round k + 2, after every rank passed round k + 1's
// barrier, which each passes only after it finished reading round k.
//  - all_reduce: reduce-scatter and all-gather in one round: rank r reduces slice r of the chunk
//    across every rank's buffer into its own buffer, then every rank copies every slice out;
//  - reduce_scatter: every rank copies its n blocks' pieces in, rank r reduces block r;
//  - all_gather: copy in, copy every rank's piece out;  broadcast: the root copies in.
// Waits spin (up to 2 ms; not at all where the ranks outnumber the cpus), then yield, then sleep,
// and check the time-out, abort(), the host's abort flag, a failure another rank recorded in the
// segment, and whether the awaited rank's process is still alive.
#ifndef CHORUS_SHM_SHM_COMMUNICATOR_H_
#define CHORUS_SHM_SHM_COMMUNICATOR_H_

#include <chorus/plugin.h>

#include <atomic>
#include <chorus/names.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "segment.h"

namespace chorus::shm {

inline constexpr size_t kDefaultChunkBytes = size_t{256} << 10;
// An all_reduce of at most this many bytes takes one round with one barrier: every rank copies
// its input in and then sums every rank's copy itself (in rank order, so every rank gets the same
// bits). Small operations are bound by the barriers, not by the n-fold reading.
inline constexpr size_t kOneBarrierBytes = size_t{16} << 10;

class ShmCommunicator {
 public:
  // Rendezvous through `store`; throws sdk::Error (UNSUPPORTED when the ranks are on different
  // machines, TIMEOUT when a rank does not arrive).
  explicit ShmCommunicator(const chorus_communicator_create_args& args);
  ~ShmCommunicator();

  void AllReduce(const chorus_all_reduce_args& args);
  void Broadcast(const chorus_collective_broadcast_args& args);
  void AllGather(const chorus_collective_all_gather_args& args);
  void ReduceScatter(const chorus_reduce_scatter_args& args);
  void Barrier();
  void Abort();

 private:
  // Operation codes in a signature (sdk::SignatureCode: 0 is no operation).
  enum Op : int64_t {
    kAllReduce = sdk::SignatureCode(CHORUS_OP_ALL_REDUCE),
    kBroadcast = sdk::SignatureCode(CHORUS_OP_BROADCAST),
    kAllGather = sdk::SignatureCode(CHORUS_OP_ALL_GATHER),
    kReduceScatter = sdk::SignatureCode(CHORUS_OP_REDUCE_SCATTER),
    kBarrier = sdk::SignatureCode(CHORUS_OP_BARRIER)
  };

  // Starts an operation: checks the communicator is usable and publishes its signature.
  void Begin(Op op, size_t count, chorus_dtype dtype, chorus_reduce_op reduce, int root);
  // Raises this rank's phase and waits for every rank to reach it. The first barrier of an
  // operation also compares every rank's signature.
  void BarrierPhase(bool check_signature);
  void WaitForRank(uint32_t rank, uint64_t phase);
  // Set-up: waits until every rank mapped the segment; fails at once when a rank that mapped it
  // is gone, and at the time-out.
  void WaitUntilEveryRankMapped();
  [[noreturn]] void FailOperation(chorus_status status, const std::string& message);
  // "shm <operation> (rank r of n)", for messages.
  std::string What() const;

  uint32_t rank_;
  uint32_t size_;
  int64_t timeout_ms_;
  std::unique_ptr<Segment> segment_;
  uint64_t phase_ = 0;     // this rank's phase counter (mirrors its control block)
  uint64_t sequence_ = 0;  // operations started
  uint64_t round_ = 0;     // rounds run, for the buffer parity
  Op current_op_ = kBarrier;
  std::chrono::steady_clock::time_point deadline_;
  // How long a wait spins before it yields (shm_communicator.cc, kSpinFor).
  std::chrono::steady_clock::duration spin_for_{};
  std::atomic<bool> aborted_{false};
  chorus_status broken_ = CHORUS_OK;  // after a failure every later call fails with it
  std::string broken_message_;
};

}  // namespace chorus::shm

#endif  // CHORUS_SHM_SHM_COMMUNICATOR_H_
