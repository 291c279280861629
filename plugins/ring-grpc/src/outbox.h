// Chunks on their way to the right neighbour: operations queue them, the link's writer thread
// sends them in order. Bounded in bytes, so an operation cannot run far ahead of its stream.
#ifndef CHORUS_PLUGINS_RING_GRPC_OUTBOX_H_
#define CHORUS_PLUGINS_RING_GRPC_OUTBOX_H_

#include <chorus/plugin.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "chunk.h"

namespace chorus::ring_grpc {

// What the writer sends next: a chunk, or the failure that is the stream's last message.
struct Outgoing {
  Chunk chunk;
  std::optional<RingFailure> failure;
};

class Outbox {
 public:
  Outbox(int right_rank, size_t capacity_bytes)
      : right_rank_(right_rank), capacity_bytes_(capacity_bytes) {}
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Queues a chunk, waiting up to timeout_ms (< 0: no limit) while capacity_bytes are queued
  // (one chunk of any size fits an empty queue). Fails with TIMEOUT naming the right
  // neighbour, PEER_LOST when its stream broke, ABORTED, or the failure queued before.
  void Push(Chunk chunk, int64_t timeout_ms);

  // Queues `failure` as the last item, after the chunks queued before it (so the neighbour
  // sees what this rank sent, then why it stopped); later pushes fail with it. Only the first
  // failure counts; true if this was it.
  bool PushFailure(RingFailure failure);

  // For the writer: waits for the next item; nullopt when nothing more will come (closed and
  // drained, after the failure, or broken).
  std::optional<Outgoing> Pop();

  // For the writer: the stream broke. Queued chunks are dropped; pushes fail with PEER_LOST
  // and `message`.
  void Broken(std::string message);

  // No more pushes (the communicator is being destroyed): Pop drains the queue, then ends.
  void Close();

  // Pushes, now and later, fail with ABORTED.
  void Abort();

 private:
  const int right_rank_;
  const size_t capacity_bytes_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Outgoing> queue_;
  size_t queued_bytes_ = 0;
  bool closed_ = false;                 // Close() was called
  std::optional<RingFailure> failure_;  // PushFailure() was called
  std::optional<std::string> broken_;   // Broken() was called
  bool aborted_ = false;
};

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_OUTBOX_H_
