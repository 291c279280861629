#include "ring_algorithms.h"

#include <chorus/names.hpp>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <string>
#include <utility>

#include "block_layout.h"

namespace chorus::ring_grpc {
namespace {

// The SDK's name of a value from a signature (chorus/names.hpp), or "<kind> <value>" where the
// SDK has none (`name` is null).
std::string NameOr(const char* name, const char* kind, uint32_t value) {
  return name != nullptr ? name : std::string(kind) + " " + std::to_string(value);
}

// The signature's size as a count, for messages: "1001 elements of f32 (4004 bytes)".
std::string DescribeSize(const OpSignature& s) {
  const size_t element = chorus_dtype_size(static_cast<chorus_dtype>(
      s.dtype < CHORUS_DTYPE_COUNT ? s.dtype : static_cast<uint32_t>(CHORUS_DTYPE_COUNT)));
  std::string text;
  if (element != 0) text = std::to_string(s.total_bytes / element) + " elements of ";
  return text + NameOr(sdk::DtypeName(s.dtype, nullptr), "dtype", s.dtype) + " (" +
         std::to_string(s.total_bytes) + " bytes)";
}

// INVALID_ARGUMENT naming both sides when the left neighbour's operation differs from ours.
void CheckSignature(const OpSignature& mine, const OpSignature& theirs, int my_rank,
                    int their_rank) {
  if (theirs == mine) return;
  const std::string them = "rank " + std::to_string(their_rank);
  const std::string me = "rank " + std::to_string(my_rank);
  if (theirs.op != mine.op) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, them, " called ",
              NameOr(sdk::CollectiveOpName(theirs.op, nullptr), "operation", theirs.op), " where ",
              me, " called ", NameOr(sdk::CollectiveOpName(mine.op, nullptr), "operation", mine.op),
              "; every rank must call the same collectives in the same order");
  }
  if (theirs.total_bytes != mine.total_bytes || theirs.dtype != mine.dtype) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, them, " passed ", DescribeSize(theirs), " but ", me,
              " passed ", DescribeSize(mine), "; every rank must pass the same count and dtype");
  }
  if (theirs.reduce_op != mine.reduce_op) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, them, " reduces with ",
              NameOr(sdk::ReduceOpName(theirs.reduce_op, nullptr), "reduce op", theirs.reduce_op),
              " but ", me, " with ",
              NameOr(sdk::ReduceOpName(mine.reduce_op, nullptr), "reduce op", mine.reduce_op));
  }
  sdk::Fail(CHORUS_INVALID_ARGUMENT, them, " broadcasts from root ", theirs.root, " but ", me,
            " from root ", mine.root);
}

// Sends and receives the segments of one operation, checking what arrives.
class StepIo {
 public:
  StepIo(const OpContext& context, OpSignature signature)
      : context_(context), signature_(signature) {}

  void Send(uint32_t step, uint32_t segment, std::string data) {
    context_.link->Send(
        Chunk{ChunkKey{context_.sequence, step, segment}, signature_, std::move(data)},
        context_.timeout_ms);
  }

  // A buffer holding a copy of `bytes` bytes at `source`.
  std::string Copy(const char* source, size_t bytes) {
    std::string data = context_.link->buffers().Take();
    if (bytes > 0) data.assign(source, bytes);
    return data;
  }

  // Gives back the buffer of a segment that is not passed on.
  void Recycle(std::string data) { context_.link->buffers().Give(std::move(data)); }

  // The segment's bytes, after checking that the sender ran the same operation.
  std::string Receive(uint32_t step, uint32_t segment, size_t expected_bytes) {
    RingLink& link = *context_.link;
    Chunk chunk = link.Receive(ChunkKey{context_.sequence, step, segment}, context_.timeout_ms);
    CheckSignature(signature_, chunk.signature, link.rank(), link.left());
    if (chunk.data.size() != expected_bytes) {
      sdk::Fail(CHORUS_INTERNAL, "rank ", link.left(), " sent ", chunk.data.size(),
                " bytes for step ", step, " segment ", segment, " where ", expected_bytes,
                " were expected (a plugin of another version?)");
    }
    return std::move(chunk.data);
  }

 private:
  const OpContext& context_;
  const OpSignature signature_;
};

const char* Bytes(const void* base, size_t element_offset, size_t element_bytes) {
  return static_cast<const char*>(base) + element_offset * element_bytes;
}
char* Bytes(void* base, size_t element_offset, size_t element_bytes) {
  return static_cast<char*>(base) + element_offset * element_bytes;
}

// Copies a received segment of `bytes` bytes (its size was checked on receipt) to `destination`.
void CopyIn(char* destination, const std::string& data, size_t bytes) {
  if (bytes > 0) std::memcpy(destination, data.data(), bytes);
}

// (x mod n) for a possibly negative x.
int Mod(int x, int n) { return ((x % n) + n) % n; }

OpSignature Signature(chorus_collective_op op, chorus_dtype dtype, uint32_t reduce_op, int32_t root,
                      uint64_t total_bytes) {
  return OpSignature{static_cast<uint32_t>(op), static_cast<uint32_t>(dtype), reduce_op, root,
                     total_bytes};
}

}  // namespace

void RingAllReduce(const OpContext& context, const void* send, void* recv, size_t count,
                   chorus_dtype dtype, chorus_reduce_op op) {
  const int n = context.link->size();
  const int r = context.link->rank();
  const size_t element = chorus_dtype_size(dtype);
  const Segmentation segments(element, context.segment_bytes);
  StepIo io(context,
            Signature(CHORUS_OP_ALL_REDUCE, dtype, static_cast<uint32_t>(op), 0, count * element));
  const auto last_step = static_cast<uint32_t>(2 * n - 3);

  // Reduce-scatter, step 0: this rank's own block, as it is.
  {
    const ElementRange block = BlockOf(count, n, r);
    const uint32_t segment_count = segments.SegmentCount(block.count);
    for (uint32_t k = 0; k < segment_count; ++k) {
      const ElementRange piece = segments.Segment(block.count, k);
      io.Send(0, k,
              io.Copy(Bytes(send, block.begin + piece.begin, element), piece.count * element));
    }
  }
  // Steps 0..n-2 receive block r-s-1, add this rank's part and pass it on; after step n-2 this
  // rank holds block r+1 complete. Steps n-1..2n-3 (all-gather) store complete blocks and pass
  // them on. A segment is forwarded as soon as it is done.
  for (uint32_t step = 0; step <= last_step; ++step) {
    const bool reducing = step <= static_cast<uint32_t>(n - 2);
    const int b = reducing ? Mod(r - static_cast<int>(step) - 1, n)
                           : Mod(r - static_cast<int>(step - (n - 1)), n);
    const ElementRange block = BlockOf(count, n, b);
    const uint32_t segment_count = segments.SegmentCount(block.count);
    for (uint32_t k = 0; k < segment_count; ++k) {
      const ElementRange piece = segments.Segment(block.count, k);
      const size_t first = block.begin + piece.begin;
      std::string data = io.Receive(step, k, piece.count * element);
      if (reducing) {
        sdk::ReduceOnHost(data.data(), Bytes(send, first, element), data.data(), piece.count, dtype,
                          op);
      }
      if (step >= static_cast<uint32_t>(n - 2))
        CopyIn(Bytes(recv, first, element), data, piece.count * element);
      if (step < last_step) {
        io.Send(step + 1, k, std::move(data));
      } else {
        io.Recycle(std::move(data));
      }
    }
  }
}

void RingBroadcast(const OpContext& context, void* data, size_t count, chorus_dtype dtype,
                   int32_t root) {
  const int n = context.link->size();
  const int distance = Mod(context.link->rank() - root, n);  // hops from the root
  const size_t element = chorus_dtype_size(dtype);
  const Segmentation segments(element, context.segment_bytes);
  StepIo io(context, Signature(CHORUS_OP_BROADCAST, dtype, 0, root, count * element));
  const uint32_t segment_count = segments.SegmentCount(count);
  for (uint32_t k = 0; k < segment_count; ++k) {
    const ElementRange piece = segments.Segment(count, k);
    char* bytes = Bytes(data, piece.begin, element);
    if (distance == 0) {
      io.Send(0, k, io.Copy(bytes, piece.count * element));
      continue;
    }
    std::string received = io.Receive(0, k, piece.count * element);
    CopyIn(bytes, received, piece.count * element);
    if (distance < n - 1) {
      io.Send(0, k, std::move(received));
    } else {
      io.Recycle(std::move(received));
    }
  }
}

void RingAllGather(const OpContext& context, const void* send, void* recv, size_t count,
                   chorus_dtype dtype) {
  const int n = context.link->size();
  const int r = context.link->rank();
  const size_t element = chorus_dtype_size(dtype);
  const Segmentation segments(element, context.segment_bytes);
  StepIo io(context, Signature(CHORUS_OP_ALL_GATHER, dtype, 0, 0, count * element));
  const uint32_t segment_count = segments.SegmentCount(count);
  // Step 0 sends this rank's block; step s receives block r-s-1 and passes it on.
  for (uint32_t k = 0; k < segment_count; ++k) {
    const ElementRange piece = segments.Segment(count, k);
    io.Send(0, k, io.Copy(Bytes(send, piece.begin, element), piece.count * element));
  }
  char* own = Bytes(recv, static_cast<size_t>(r) * count, element);
  if (count > 0 && own != send) std::memmove(own, send, count * element);
  const auto last_step = static_cast<uint32_t>(n - 2);
  for (uint32_t step = 0; step <= last_step; ++step) {
    const auto b = static_cast<size_t>(Mod(r - static_cast<int>(step) - 1, n));
    for (uint32_t k = 0; k < segment_count; ++k) {
      const ElementRange piece = segments.Segment(count, k);
      std::string data = io.Receive(step, k, piece.count * element);
      CopyIn(Bytes(recv, b * count + piece.begin, element), data, piece.count * element);
      if (step < last_step) {
        io.Send(step + 1, k, std::move(data));
      } else {
        io.Recycle(std::move(data));
      }
    }
  }
}

void RingReduceScatter(const OpContext& context, const void* send, void* recv, size_t recv_count,
                       chorus_dtype dtype, chorus_reduce_op op) {
  const int n = context.link->size();
  const int r = context.link->rank();
  const size_t element = chorus_dtype_size(dtype);
  const Segmentation segments(element, context.segment_bytes);
  StepIo io(context, Signature(CHORUS_OP_REDUCE_SCATTER, dtype, static_cast<uint32_t>(op), 0,
                               recv_count * element));
  const uint32_t segment_count = segments.SegmentCount(recv_count);
  // Step 0 sends block r-1; step s receives block r-s-2, adds this rank's part and passes it
  // on, so that the last step (n-2) completes block r here.
  {
    const auto b = static_cast<size_t>(Mod(r - 1, n));
    for (uint32_t k = 0; k < segment_count; ++k) {
      const ElementRange piece = segments.Segment(recv_count, k);
      io.Send(0, k,
              io.Copy(Bytes(send, b * recv_count + piece.begin, element), piece.count * element));
    }
  }
  const auto last_step = static_cast<uint32_t>(n - 2);
  for (uint32_t step = 0; step <= last_step; ++step) {
    const auto b = static_cast<size_t>(Mod(r - static_cast<int>(step) - 2, n));
    for (uint32_t k = 0; k < segment_count; ++k) {
      const ElementRange piece = segments.Segment(recv_count, k);
      std::string data = io.Receive(step, k, piece.count * element);
      sdk::ReduceOnHost(data.data(), Bytes(send, b * recv_count + piece.begin, element),
                        data.data(), piece.count, dtype, op);
      if (step < last_step) {
        io.Send(step + 1, k, std::move(data));
      } else {
        CopyIn(Bytes(recv, piece.begin, element), data, piece.count * element);
        io.Recycle(std::move(data));
      }
    }
  }
}

void RingBarrier(const OpContext& context) {
  const int n = context.link->size();
  const int r = context.link->rank();
  StepIo io(context, Signature(CHORUS_OP_BARRIER, CHORUS_U8, 0, 0, 0));
  if (r == 0) {
    io.Send(0, 0, {});    // lap 1 starts
    io.Receive(0, 0, 0);  // lap 1 is back: every rank arrived
    io.Send(1, 0, {});    // lap 2 tells the others
    return;
  }
  io.Receive(0, 0, 0);
  io.Send(0, 0, {});
  io.Receive(1, 0, 0);
  if (r < n - 1) io.Send(1, 0, {});
}

}  // namespace chorus::ring_grpc
