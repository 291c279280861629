#include "inbox.h"

#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <utility>

#include "deadline.h"

namespace chorus::ring_grpc {
void Inbox::Deliver(Chunk chunk) {
  {
    std::lock_guard lock(mutex_);
    const ChunkKey key = chunk.key;
    chunks_.insert_or_assign(key, std::move(chunk));
  }
  changed_.notify_all();
}

void Inbox::Close(chorus_status status, std::string message) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    close_status_ = status;
    close_message_ = std::move(message);
  }
  changed_.notify_all();
}

void Inbox::Abort() {
  {
    std::lock_guard lock(mutex_);
    aborted_ = true;
  }
  changed_.notify_all();
}

Chunk Inbox::Take(const ChunkKey& key, int64_t timeout_ms) {
  const Deadline deadline = Deadline::After(timeout_ms);
  std::unique_lock lock(mutex_);
  while (true) {
    if (aborted_) sdk::Fail(CHORUS_ABORTED, "aborted");
    if (auto found = chunks_.find(key); found != chunks_.end()) {
      Chunk chunk = std::move(found->second);
      chunks_.erase(found);
      return chunk;
    }
    if (closed_) sdk::Fail(close_status_, close_message_);
    if (sdk::HostAbortRequested()) sdk::Fail(CHORUS_ABORTED, "the core requested an abort");
    if (deadline.expired()) {
      sdk::Fail(CHORUS_TIMEOUT, "timed out after ", timeout_ms, " ms waiting for rank ", left_rank_,
                " (left neighbour) to send step ", key.step, " segment ", key.segment);
    }
    changed_.wait_until(lock, deadline.NextWake(kAbortPoll));
  }
}

}  // namespace chorus::ring_grpc
