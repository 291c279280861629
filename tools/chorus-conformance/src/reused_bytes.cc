#include "reused_bytes.h"

#include <mutex>
#include <utility>

namespace chorus::conformance::internal {
namespace {

constexpr size_t kSmallestKept = size_t{64} << 10;
constexpr size_t kMostKept = size_t{128} << 20;

struct KeptBlocks {
  std::mutex mutex;
  std::vector<std::vector<unsigned char>> blocks;  // each empty, its capacity kept
  size_t bytes = 0;                                // the blocks' capacities together
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
    size_t best = kept.blocks.size();
    for (size_t i = 0; i < kept.blocks.size(); ++i) {
      const size_t capacity = kept.blocks[i].capacity();
      if (capacity < size || capacity / 4 > size) continue;
      if (best == kept.blocks.size() || capacity < kept.blocks[best].capacity()) best = i;
    }
    if (best < kept.blocks.size()) {
      bytes = std::move(kept.blocks[best]);
      kept.blocks[best] = std::move(kept.blocks.back());
      kept.blocks.pop_back();
      kept.bytes -= bytes.capacity();
    }
  }
  bytes.resize(size);  // zeroes: the block was emptied when it was given back
  return bytes;
}

void GiveBackBytes(std::vector<unsigned char>&& bytes) {
  std::vector<unsigned char> block = std::move(bytes);
  if (block.capacity() < kSmallestKept) return;
  block.clear();
  KeptBlocks& kept = Kept();
  std::lock_guard<std::mutex> lock(kept.mutex);
  if (kept.bytes + block.capacity() > kMostKept) return;  // freed after the lock, below
  kept.bytes += block.capacity();
  kept.blocks.push_back(std::move(block));
}

}  // namespace chorus::conformance::internal
