#include "builtin/ring_run.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <deque>

#include "base/host_kernels.h"
#include "base/logging.h"

namespace chorus::internal {
namespace {

// Tags: the high byte marks the ring's messages; the low bits tell operations and phases apart,
// so that ranks running different operations fail on a size mismatch or time out rather than
// mix their data.
constexpr uint64_t kTagBase = uint64_t{0x52} << 56;  // 'R'
constexpr uint64_t kAllReduceScatterTag = kTagBase | 1;
constexpr uint64_t kAllReduceGatherTag = kTagBase | 2;
constexpr uint64_t kBroadcastTag = kTagBase | 3;
constexpr uint64_t kAllGatherTag = kTagBase | 4;
constexpr uint64_t kReduceScatterTag = kTagBase | 5;
constexpr uint64_t kBarrierTag = kTagBase | 6;

// Sends in flight before the oldest is waited on. Receives posted ahead: two when they land in
// the scratch slots of a reduce, more when they land in place.
constexpr size_t kSendWindow = 4;
constexpr size_t kReduceLookahead = 2;
constexpr size_t kCopyLookahead = 4;

const char* RunName(chorus_collective_op op) {
  switch (op) {
    case CHORUS_OP_ALL_REDUCE:
      return "ring all_reduce";
    case CHORUS_OP_BROADCAST:
      return "ring broadcast";
    case CHORUS_OP_ALL_GATHER:
      return "ring all_gather";
    case CHORUS_OP_REDUCE_SCATTER:
      return "ring reduce_scatter";
    case CHORUS_OP_BARRIER:
      return "ring barrier";
    default:
      return "ring";
  }
}

void Pop(std::deque<P2pOperation>& operations) {
  operations.front().Wait();
  operations.pop_front();
}

}  // namespace

RingRun::RingRun(const chorus_algorithm_run_args& args, size_t segment_bytes)
    : args_(args),
      p2p_(*args.p2p),
      rank_(args.p2p->rank),
      size_(args.p2p->size),
      left_((rank_ + size_ - 1) % size_),
      right_((rank_ + 1) % size_),
      element_bytes_(args.op == CHORUS_OP_BARRIER ? 1 : chorus_dtype_size(args.dtype)),
      segment_elements_(std::max<size_t>(1, segment_bytes / element_bytes_)),
      segment_bytes_(segment_elements_ * element_bytes_),
      name_(RunName(args.op)) {}

RingRun::~RingRun() {
  if (!abandoned_) return;
  // A request may still write here until the transport is aborted: leak rather than free.
  (void)scratch_.release();
  (void)work_[0].release();
  (void)work_[1].release();
}

size_t RingRun::SegmentCount(size_t count, size_t segment) const {
  return std::min(segment_elements_, count - segment * segment_elements_);
}

int RingRun::Mod(int64_t value) const {
  const int64_t n = size_;
  return static_cast<int>(((value % n) + n) % n);
}

void RingRun::AllocateSlots(size_t largest_count) {
  slot_bytes_ = std::min(segment_bytes_, largest_count * element_bytes_);
  if (slot_bytes_ > 0) scratch_.reset(new uint8_t[2 * slot_bytes_]);
}

P2pContext RingRun::Context(const char* phase, size_t step, size_t steps, size_t segment,
                            size_t segments) const {
  P2pContext context;
  context.algorithm = name_;
  context.phase = phase;
  context.step = step;
  context.steps = steps;
  context.segment = segment + 1;
  context.segments = segments;
  return context;
}

P2pOperation RingRun::Start(P2pOperation::Kind kind, int peer, uint64_t tag, const void* data,
                            size_t count, const P2pContext& context) {
  return P2pOperation(p2p_, kind, peer, tag, const_cast<void*>(data), count * element_bytes_,
                      args_.timeout_ms, context, &abandoned_);
}

void RingRun::RunStep(const Step& s) {
  const bool reduce = s.mine != nullptr;
  const size_t send_segments = Segments(s.send_count);
  const size_t recv_segments = Segments(s.recv_count);
  const size_t lookahead = reduce ? kReduceLookahead : kCopyLookahead;
  // Declared before the operations, so that on a failure the operations are finished first.
  std::deque<P2pOperation> sends, recvs;
  size_t posted = 0;
  for (size_t k = 0; k < std::max(send_segments, recv_segments); ++k) {
    // Post the next receives before this segment is reduced, so the data keeps flowing.
    for (; posted < recv_segments && recvs.size() < lookahead; ++posted) {
      void* into = reduce ? Slot(posted % kReduceLookahead) : s.recv + posted * segment_bytes_;
      recvs.push_back(Start(P2pOperation::Kind::kRecv, left_, s.tag, into,
                            SegmentCount(s.recv_count, posted),
                            Context(s.phase, s.step, s.steps, posted, recv_segments)));
    }
    if (k < send_segments) {
      sends.push_back(Start(P2pOperation::Kind::kSend, right_, s.tag, s.send + k * segment_bytes_,
                            SegmentCount(s.send_count, k),
                            Context(s.phase, s.step, s.steps, k, send_segments)));
      if (sends.size() > kSendWindow) Pop(sends);
    }
    if (k < recv_segments) {
      Pop(recvs);
      if (reduce) {
        const size_t offset = k * segment_bytes_;
        ReduceHost(s.recv + offset, s.mine + offset, Slot(k % kReduceLookahead),
                   SegmentCount(s.recv_count, k), args_.dtype, args_.op_reduce);
      }
    }
  }
  // Every send of a step ends with it: the next step may overwrite what they read.
  while (!sends.empty()) Pop(sends);
}

void RingRun::AllReduce() {
  const size_t count = args_.count;
  const auto* send = static_cast<const uint8_t*>(args_.send);
  auto* recv = static_cast<uint8_t*>(args_.recv);
  if (count == 0) return;
  if (size_ == 1) {
    if (send != recv) std::memmove(recv, send, count * element_bytes_);
    return;
  }
  // size_ chunks, the first count % size_ one element longer.
  const size_t n = static_cast<size_t>(size_);
  const size_t base = count / n, longer = count % n;
  const auto offset = [&](int c) {
    const size_t chunk = static_cast<size_t>(c);
    return (chunk * base + std::min(chunk, longer)) * element_bytes_;
  };
  const auto length = [&](int c) { return base + (static_cast<size_t>(c) < longer ? 1 : 0); };
  AllocateSlots(base + (longer > 0 ? 1 : 0));
  const size_t steps = n - 1;
  // Reduce-scatter: at step s this rank sends chunk rank-s and receives chunk rank-s-1, which it
  // reduces with its own; after size-1 steps it holds chunk rank+1 reduced over every rank. In
  // place works: a chunk's original is read (as `mine`) before it is overwritten.
  for (size_t s = 0; s < steps; ++s) {
    const int out_chunk = Mod(rank_ - static_cast<int64_t>(s));
    const int in_chunk = Mod(rank_ - static_cast<int64_t>(s) - 1);
    RunStep(Step{kAllReduceScatterTag, "reduce-scatter", s + 1, steps,
                 (s == 0 ? send : recv) + offset(out_chunk), length(out_chunk),
                 recv + offset(in_chunk), length(in_chunk), send + offset(in_chunk)});
  }
  // All-gather: pass the reduced chunks on, starting with chunk rank+1.
  for (size_t s = 0; s < steps; ++s) {
    const int out_chunk = Mod(rank_ + 1 - static_cast<int64_t>(s));
    const int in_chunk = Mod(rank_ - static_cast<int64_t>(s));
    RunStep(Step{kAllReduceGatherTag, "all-gather", s + 1, steps, recv + offset(out_chunk),
                 length(out_chunk), recv + offset(in_chunk), length(in_chunk), nullptr});
  }
}

void RingRun::ReduceScatter() {
  const size_t count = args_.count;  // per rank
  const auto* send = static_cast<const uint8_t*>(args_.send);
  auto* recv = static_cast<uint8_t*>(args_.recv);
  if (count == 0) return;
  const size_t block = count * element_bytes_;
  if (size_ == 1) {
    if (send != recv) std::memmove(recv, send, block);
    return;
  }
  AllocateSlots(count);
  const size_t steps = static_cast<size_t>(size_) - 1;
  // As all_reduce's first phase, shifted by one so that rank r ends with block r. Partial
  // results go to two work blocks in turn (a step reads the previous step's while writing its
  // own); the last step writes to recv.
  for (size_t s = 0; s < steps; ++s) {
    const int out_block = Mod(rank_ - static_cast<int64_t>(s) - 1);
    const int in_block = Mod(rank_ - static_cast<int64_t>(s) - 2);
    const uint8_t* out =
        s == 0 ? send + static_cast<size_t>(out_block) * block : work_[(s - 1) % 2].get();
    uint8_t* into = recv;
    if (s + 1 < steps) {
      if (!work_[s % 2]) work_[s % 2].reset(new uint8_t[block]);
      into = work_[s % 2].get();
    }
    RunStep(Step{kReduceScatterTag, "reduce-scatter", s + 1, steps, out, count, into, count,
                 send + static_cast<size_t>(in_block) * block});
  }
}

void RingRun::AllGather() {
  const size_t count = args_.count;  // per rank
  auto* recv = static_cast<uint8_t*>(args_.recv);
  if (count == 0) return;
  const size_t block = count * element_bytes_;
  uint8_t* own = recv + static_cast<size_t>(rank_) * block;
  if (own != args_.send) std::memmove(own, args_.send, block);
  const size_t steps = static_cast<size_t>(size_) - 1;
  for (size_t s = 0; s < steps; ++s) {
    const int out_block = Mod(rank_ - static_cast<int64_t>(s));
    const int in_block = Mod(rank_ - static_cast<int64_t>(s) - 1);
    RunStep(Step{kAllGatherTag, "", s + 1, steps, recv + static_cast<size_t>(out_block) * block,
                 count, recv + static_cast<size_t>(in_block) * block, count, nullptr});
  }
}

void RingRun::Broadcast() {
  const size_t count = args_.count;
  auto* data = static_cast<uint8_t*>(args_.recv);
  if (count == 0 || size_ == 1) return;
  // A chain root, root+1, ...: each rank forwards a segment as soon as it has it.
  const int position = Mod(static_cast<int64_t>(rank_) - args_.root);
  const bool receives = position != 0;
  const bool forwards = position != size_ - 1;
  const size_t segments = Segments(count);
  std::deque<P2pOperation> sends, recvs;
  size_t posted = 0;
  for (size_t k = 0; k < segments; ++k) {
    if (receives) {
      for (; posted < segments && recvs.size() < kCopyLookahead; ++posted) {
        recvs.push_back(Start(P2pOperation::Kind::kRecv, left_, kBroadcastTag,
                              data + posted * segment_bytes_, SegmentCount(count, posted),
                              Context("", 0, 0, posted, segments)));
      }
      Pop(recvs);
    }
    if (forwards) {
      sends.push_back(Start(P2pOperation::Kind::kSend, right_, kBroadcastTag,
                            data + k * segment_bytes_, SegmentCount(count, k),
                            Context("", 0, 0, k, segments)));
      if (sends.size() > kSendWindow) Pop(sends);
    }
  }
  while (!sends.empty()) Pop(sends);
}

void RingRun::Barrier() {
  if (size_ == 1) return;
  // Two rounds of a token around the ring: after the first, rank 0 knows that every rank has
  // arrived; the second tells the others.
  uint8_t token_out = 1, token_in = 0;
  for (size_t round = 1; round <= 2; ++round) {
    const P2pContext context = Context("token", round, 2, 0, 1);
    P2pOperation recv = Start(P2pOperation::Kind::kRecv, left_, kBarrierTag, &token_in, 1, context);
    if (rank_ != 0) recv.Wait();
    P2pOperation send =
        Start(P2pOperation::Kind::kSend, right_, kBarrierTag, &token_out, 1, context);
    send.Wait();
    recv.Wait();
  }
}

}  // namespace chorus::internal
