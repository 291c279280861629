// What travels around the ring: segments of an operation's data, and failures.
#ifndef CHORUS_PLUGINS_RING_GRPC_CHUNK_H_
#define CHORUS_PLUGINS_RING_GRPC_CHUNK_H_

#include <chorus/plugin.h>

#include <compare>
#include <cstdint>
#include <string>

namespace chorus::ring_grpc {

// Which piece of which operation a chunk is. Operations are numbered from 1 on each rank, so
// the n-th operation of every rank has the same number.
struct ChunkKey {
  uint64_t op_sequence = 0;
  uint32_t step = 0;
  uint32_t segment = 0;
  auto operator<=>(const ChunkKey&) const = default;
};

// What every chunk of an operation carries besides its key, so that a receiver can tell that
// its neighbour called another operation, or the same one with another count or dtype. Enum
// values are kept as sent (a peer may send any number).
struct OpSignature {
  uint32_t op = 0;         // chorus_collective_op
  uint32_t dtype = 0;      // chorus_dtype
  uint32_t reduce_op = 0;  // chorus_reduce_op, 0 where the operation reduces nothing
  int32_t root = 0;        // broadcast's root, 0 elsewhere
  uint64_t total_bytes = 0;
  bool operator==(const OpSignature&) const = default;
};

struct Chunk {
  ChunkKey key;
  OpSignature signature;
  std::string data;
};

// A failure passed around the ring so that every rank fails instead of waiting.
struct RingFailure {
  chorus_status status = CHORUS_INTERNAL;
  int32_t rank = -1;  // where it happened first
  std::string message;
};

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_CHUNK_H_
