#include "outbox.h"

#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <utility>

#include "deadline.h"

namespace chorus::ring_grpc {
void Outbox::Push(Chunk chunk, int64_t timeout_ms) {
  const Deadline deadline = Deadline::After(timeout_ms);
  const size_t bytes = chunk.data.size();
  std::unique_lock lock(mutex_);
  while (true) {
    if (aborted_) sdk::Fail(CHORUS_ABORTED, "aborted");
    // A failure that came around the ring is the cause; a broken stream may be its effect.
    if (failure_) {
      sdk::Fail(failure_->status, "rank ", failure_->rank, " failed: ", failure_->message);
    }
    if (broken_) sdk::Fail(CHORUS_PEER_LOST, *broken_);
    if (closed_) sdk::Fail(CHORUS_INTERNAL, "the communicator is being destroyed");
    if (queued_bytes_ == 0 || queued_bytes_ + bytes <= capacity_bytes_) break;
    if (sdk::HostAbortRequested()) sdk::Fail(CHORUS_ABORTED, "the core requested an abort");
    if (deadline.expired()) {
      sdk::Fail(CHORUS_TIMEOUT, "timed out after ", timeout_ms, " ms waiting for rank ",
                right_rank_, " (right neighbour) to take ", queued_bytes_,
                " queued bytes; it is not reading its stream");
    }
    changed_.wait_until(lock, deadline.NextWake(kAbortPoll));
  }
  queued_bytes_ += bytes;
  queue_.push_back(Outgoing{std::move(chunk), std::nullopt});
  lock.unlock();
  changed_.notify_all();
}

bool Outbox::PushFailure(RingFailure failure) {
  {
    std::lock_guard lock(mutex_);
    if (failure_) return false;
    failure_ = failure;
    queue_.push_back(Outgoing{Chunk{}, std::move(failure)});
  }
  changed_.notify_all();
  return true;
}

std::optional<Outgoing> Outbox::Pop() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty() || closed_ || broken_; });
  if (broken_ || queue_.empty()) return std::nullopt;
  Outgoing next = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= next.chunk.data.size();
  const bool last = next.failure.has_value();
  if (last) closed_ = true;  // nothing follows a failure
  lock.unlock();
  changed_.notify_all();
  return next;
}

void Outbox::Broken(std::string message) {
  {
    std::lock_guard lock(mutex_);
    if (!broken_) broken_ = std::move(message);
    queue_.clear();
    queued_bytes_ = 0;
  }
  changed_.notify_all();
}

void Outbox::Close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

void Outbox::Abort() {
  {
    std::lock_guard lock(mutex_);
    aborted_ = true;
  }
  changed_.notify_all();
}

}  // namespace chorus::ring_grpc
