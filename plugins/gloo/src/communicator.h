// The state behind one chorus_communicator*: a connected Gloo context, the all-reduce algorithm,
// and what makes every operation safe to call: one at a time, after an abort or a failure never.
#ifndef CHORUS_PLUGINS_GLOO_COMMUNICATOR_H_
#define CHORUS_PLUGINS_GLOO_COMMUNICATOR_H_

#include <chorus/plugin.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "collectives.h"
#include "options.h"

namespace chorus::gloo_plugin {

class GlooCommunicator {
 public:
  // Checks the arguments, parses the options and connects to every rank (connect.h). Throws
  // sdk::Error.
  explicit GlooCommunicator(const chorus_communicator_create_args& args);
  // When a ring_chunked operation ran and nothing failed, first runs a barrier (bounded by the
  // time-out): Gloo's class-based algorithms may return before their last message reached its
  // peer, and closing the connections then would make a slower rank fail.
  ~GlooCommunicator();
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  int size() const { return size_; }

  // Each runs to completion on the calling thread; operations on one communicator from several
  // threads run one after the other. Arguments are checked by the caller (arguments.h). Throws
  // sdk::Error; a failure inside Gloo leaves the communicator unusable (every later call fails
  // at once with the same status), as Gloo closes its connections on errors.
  void AllReduce(const chorus_all_reduce_args& args);
  void Broadcast(const chorus_collective_broadcast_args& args);
  void AllGather(const chorus_collective_all_gather_args& args);
  void ReduceScatter(const chorus_reduce_scatter_args& args);
  void Barrier();

  // Safe from any thread at any time before destroy. Later calls fail at once with
  // CHORUS_ABORTED; the connections are closed, so peers waiting on this rank fail promptly with
  // CHORUS_PEER_LOST. Gloo cannot interrupt a wait, so a call already inside Gloo returns when
  // Gloo's own wait ends (by the time-out at the latest), then with CHORUS_ABORTED.
  void Abort() noexcept;

 private:
  // Runs `body` (Gloo calls) under the operation lock, with the abort and failure checks above,
  // after checking that every rank makes the same `call` (call_check.h): a mismatch is
  // CHORUS_INVALID_ARGUMENT on every rank, before any data moves, and leaves the communicator
  // usable.
  template <typename Body>
  void Run(const char* operation, const CallSignature& call, Body&& body);
  // Inside a catch block for a failure inside Gloo: closes the connections, records the failure
  // (every later call fails with it) and throws it as sdk::Error.
  [[noreturn]] void FailInsideGloo(const std::string& what);
  std::string Describe(const char* operation) const;
  void FailIfAborted(const std::string& what) const;

  int rank_ = 0;
  int size_ = 1;
  int64_t timeout_ms_ = 0;
  Algorithm algorithm_ = Algorithm::kRing;
  GlooContext context_;  // set once in the constructor, then only read

  std::atomic<bool> aborted_{false};
  std::mutex mutex_;  // one operation at a time: Gloo's slots and tags need one order on all ranks
  uint32_t next_tag_ = 0;                    // guarded by mutex_
  bool ran_ring_chunked_ = false;            // guarded by mutex_: a ring_chunked operation ran
  chorus_status failed_status_ = CHORUS_OK;  // guarded by mutex_
  std::string failed_message_;               // guarded by mutex_
};

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_COMMUNICATOR_H_
