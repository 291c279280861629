#include "reused_bytes.h"

#include <deque>
#include <iterator>
#include <mutex>
#include <utility>

namespace chorus::conformance::internal {
namespace {

constexpr size_t kSmallestKept = size_t{64} << 10;
constexpr size_t kMostKept = size_t{128} << 20;

struct KeptBlocks {
  std::mutex mutex;
  std::deque<std::vector<unsigned char>> blocks;  // oldest first; each empty, its capacity kept
  size_t bytes = 0;                               // the blocks' capacities together
};

KeptBlocks& Kept() {
  static auto* kept = new KeptBlocks;  // never destroyed: tensors may be dropped during exit
  return *kept;
}

}  // namespace

std::vector<unsigned char> TakeZeroedBytes(size_t size) {
  std::vector<unsigned char> bytes;
  if (size >= kSmallestKept) {
    KeptBlocks& kept = Kept();
    std::lock_guard<std::mutex> lock(kept.mutex);
    // The newest first: a sweep takes again the sizes it just gave back.
    for (auto it = kept.blocks.rbegin(); it != kept.blocks.rend(); ++it) {
      if (it->capacity() != size) continue;
      bytes = std::move(*it);
      kept.blocks.erase(std::next(it).base());
      kept.bytes -= size;
      break;
    }
  }
  bytes.resize(size);  // zeroes: the block was emptied when it was given back
  return bytes;
}

void GiveBackBytes(std::vector<unsigned char>&& bytes) {
  std::vector<unsigned char> block = std::move(bytes);
  const size_t capacity = block.capacity();
  if (capacity < kSmallestKept || capacity > kMostKept) return;
  block.clear();
  std::deque<std::vector<unsigned char>> freed;  // freed after the lock is released
  KeptBlocks& kept = Kept();
  std::lock_guard<std::mutex> lock(kept.mutex);
  while (kept.bytes + capacity > kMostKept) {
    kept.bytes -= kept.blocks.front().capacity();
    freed.push_back(std::move(kept.blocks.front()));
    kept.blocks.pop_front();
  }
  kept.bytes += capacity;
  kept.blocks.push_back(std::move(block));
}

}  // namespace chorus::conformance::internal
