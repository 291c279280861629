// A rank's place in the ring: chunks go to the right neighbour (rank + 1) and come from the left
// one (rank - 1). The ring algorithms see only this; grpc_ring_link.cc implements it over gRPC.
#ifndef CHORUS_PLUGINS_RING_GRPC_RING_LINK_H_
#define CHORUS_PLUGINS_RING_GRPC_RING_LINK_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <memory>
#include <string>

#include "buffer_pool.h"
#include "chunk.h"

namespace chorus::ring_grpc {

class RingLink {
 public:
  virtual ~RingLink() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int left() const { return (rank_ + size_ - 1) % size_; }
  int right() const { return (rank_ + 1) % size_; }

  // Queues a chunk for the right neighbour; returns once it is queued (the chunk owns its
  // bytes). Waits up to timeout_ms while too much is queued. Fails (sdk::Error) with TIMEOUT,
  // PEER_LOST, ABORTED or a failure passed from the left.
  virtual void Send(Chunk chunk, int64_t timeout_ms) = 0;

  // Waits up to timeout_ms for chunk `key` from the left neighbour. Fails with TIMEOUT naming
  // it, PEER_LOST when its stream ended first, ABORTED, or the status of a failure it passed.
  virtual Chunk Receive(const ChunkKey& key, int64_t timeout_ms) = 0;

  // Sends `failure` to the right neighbour as the stream's last message, so that the failure
  // travels around the ring; the first failure only (later ones, and one forwarded from the
  // left before, are dropped).
  virtual void PassFailure(RingFailure failure) = 0;

  // Every pending and later Send and Receive fails with ABORTED, and the right neighbour is
  // told. Safe from any thread.
  virtual void Abort() = 0;

  // Where chunk buffers come from and go back to once their bytes are used.
  virtual BufferPool& buffers() = 0;

 protected:
  RingLink(int rank, int size) : rank_(rank), size_(size) {}

 private:
  const int rank_;
  const int size_;
};

struct GrpcRingConfig {
  int rank = 0;
  int size = 2;                            // at least 2
  const chorus_kv_store* store = nullptr;  // borrowed; outlives the link
  std::string host;                        // to listen on and publish
  uint64_t segment_bytes = 0;              // every rank's must match
  int64_t timeout_ms = 0;                  // for the set-up; < 0: no limit
};

// Starts this rank's gRPC server on host:0, publishes "ring_grpc/addr/<rank>" in the store,
// opens a stream to the right neighbour's published address and waits until the left
// neighbour's stream arrives. Fails with TIMEOUT (a neighbour did not come in time),
// INVALID_ARGUMENT (ranks disagree on size or segment_bytes), UNAVAILABLE (cannot listen).
std::unique_ptr<RingLink> ConnectGrpcRing(const GrpcRingConfig& config);

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_RING_LINK_H_
