// Byte buffers (std::string) kept for reuse: a segment's buffer travels from the gRPC reader to
// the operation, out to the writer and back here, so that steady traffic allocates (and the
// kernel zero-fills) no fresh memory per message.
#ifndef CHORUS_PLUGINS_RING_GRPC_BUFFER_POOL_H_
#define CHORUS_PLUGINS_RING_GRPC_BUFFER_POOL_H_

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace chorus::ring_grpc {

class BufferPool {
 public:
  // Keeps at most max_buffers buffers of at most max_bytes capacity each.
  BufferPool(size_t max_buffers, size_t max_bytes)
      : max_buffers_(max_buffers), max_bytes_(max_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An empty buffer, with the capacity of one returned before when there is one.
  std::string Take();

  // Gives a buffer back for a later Take (dropped when the pool is full, or it is small or huge).
  void Give(std::string buffer);

 private:
  const size_t max_buffers_;
  const size_t max_bytes_;
  std::mutex mutex_;
  std::vector<std::string> buffers_;
};

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_BUFFER_POOL_H_
