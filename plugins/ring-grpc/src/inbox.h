// Chunks received from the left neighbour, keyed by (operation, step, segment), until the
// operation that needs them takes them. Filled by the gRPC server's thread.
#ifndef CHORUS_PLUGINS_RING_GRPC_INBOX_H_
#define CHORUS_PLUGINS_RING_GRPC_INBOX_H_

#include <chorus/plugin.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "chunk.h"

namespace chorus::ring_grpc {

class Inbox {
 public:
  explicit Inbox(int left_rank) : left_rank_(left_rank) {}
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  void Deliver(Chunk chunk);

  // Nothing more will arrive: the left neighbour's stream ended or passed a failure. A wait for
  // a chunk that did not arrive before fails with `status` and `message`. The first call wins.
  void Close(chorus_status status, std::string message);

  // Every wait, now and later, fails with ABORTED.
  void Abort();

  // Waits up to timeout_ms (< 0: no limit) for the chunk `key` and returns it. Fails with
  // TIMEOUT naming the left neighbour, with Close's status and message, or with ABORTED (also
  // when the host's abort flag is raised, polled every 100 ms).
  Chunk Take(const ChunkKey& key, int64_t timeout_ms);

 private:
  const int left_rank_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<ChunkKey, Chunk> chunks_;
  bool closed_ = false;
  chorus_status close_status_ = CHORUS_OK;
  std::string close_message_;
  bool aborted_ = false;
};

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_INBOX_H_
