#include "buffer_pool.h"

#include <utility>

namespace chorus::ring_grpc {
namespace {

// Smaller buffers are cheap to allocate (they come from the heap, not from fresh pages).
constexpr size_t kMinPooledBytes = 64 * 1024;

}  // namespace

std::string BufferPool::Take() {
  std::lock_guard lock(mutex_);
  if (buffers_.empty()) return {};
  std::string buffer = std::move(buffers_.back());
  buffers_.pop_back();
  buffer.clear();
  return buffer;
}

void BufferPool::Give(std::string buffer) {
  if (buffer.capacity() < kMinPooledBytes || buffer.capacity() > max_bytes_) return;
  std::lock_guard lock(mutex_);
  if (buffers_.size() < max_buffers_) buffers_.push_back(std::move(buffer));
}

}  // namespace chorus::ring_grpc
