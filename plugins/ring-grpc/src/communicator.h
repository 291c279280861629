// A ring-grpc communicator: one rank of a ring of `size`, with its gRPC link (none for size 1),
// the operation counter, and the failure state. Operations run one at a time; after any failure
// of an operation the communicator is broken and every later operation fails at once.
#ifndef CHORUS_PLUGINS_RING_GRPC_COMMUNICATOR_H_
#define CHORUS_PLUGINS_RING_GRPC_COMMUNICATOR_H_

#include <chorus/plugin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "options.h"
#include "ring_link.h"

namespace chorus::ring_grpc {

struct CommunicatorConfig {
  int rank = 0;
  int size = 1;
  const chorus_kv_store* store = nullptr;  // borrowed; outlives the communicator
  int64_t timeout_ms = 0;                  // set-up and every wait; < 0: no limit
  RingOptions options;
};

class RingCommunicator {
 public:
  // Connects the ring (a collective call: every rank must create). Fails with sdk::Error.
  explicit RingCommunicator(const CommunicatorConfig& config);
  ~RingCommunicator();
  RingCommunicator(const RingCommunicator&) = delete;
  RingCommunicator& operator=(const RingCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Arguments were checked by the caller: buffers hold what the counts say.
  void AllReduce(const void* send, void* recv, size_t count, chorus_dtype dtype,
                 chorus_reduce_op op);
  void Broadcast(void* data, size_t count, chorus_dtype dtype, int32_t root);
  void AllGather(const void* send, void* recv, size_t count, chorus_dtype dtype);
  void ReduceScatter(const void* send, void* recv, size_t recv_count, chorus_dtype dtype,
                     chorus_reduce_op op);
  void Barrier();

  // Fails the pending and every later operation with ABORTED; tells the ring. Any thread.
  void Abort();

 private:
  // Runs one operation: numbers it, fails fast when broken or aborted, and on a failure
  // records it, passes it around the ring and rethrows it with the operation's name.
  template <typename Body>
  void Run(const char* name, Body&& body);

  [[noreturn]] void FailOperation(const std::string& prefix, chorus_status status,
                                  const std::string& detail);

  const int rank_;
  const int size_;
  const int64_t timeout_ms_;
  const uint64_t segment_bytes_;
  std::unique_ptr<RingLink> link_;  // null when size is 1

  std::mutex operation_mutex_;  // one operation at a time
  uint64_t next_sequence_ = 1;  // guarded by operation_mutex_

  std::atomic<bool> aborted_{false};
  std::mutex failure_mutex_;
  std::optional<std::pair<chorus_status, std::string>> failure_;  // the first failure
};

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_COMMUNICATOR_H_
