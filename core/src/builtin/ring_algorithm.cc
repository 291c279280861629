// The C table of the ring algorithm: argument checks, then a RingRun.
#include "builtin/ring_algorithm.h"

#include <chorus/base/dtype.h>

#include <chorus/plugin_sdk.hpp>
#include <limits>

#include "builtin/ring_run.h"

namespace chorus::internal {
namespace {

using sdk::Fail;

constexpr uint32_t kSupportedOps =
    CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) | CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
    CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER) | CHORUS_OP_BIT(CHORUS_OP_REDUCE_SCATTER) |
    CHORUS_OP_BIT(CHORUS_OP_BARRIER);

void RequireP2p(const chorus_p2p* p2p) {
  if (p2p == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "ring: p2p is NULL");
  if (p2p->struct_size < CHORUS_STRUCT_SIZE(chorus_p2p, free) || p2p->isend == nullptr ||
      p2p->irecv == nullptr || p2p->wait == nullptr || p2p->test == nullptr ||
      p2p->free == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "ring: the p2p table is too small or lacks a function");
  }
  if (p2p->size < 1 || p2p->rank < 0 || p2p->rank >= p2p->size) {
    Fail(CHORUS_INVALID_ARGUMENT, "ring: p2p rank ", p2p->rank, " of size ", p2p->size,
         " is not a valid rank");
  }
}

void RequireBuffer(const void* pointer, const char* name, const char* op) {
  if (pointer == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "ring ", op, ": ", name, " is NULL");
}

void Validate(const chorus_algorithm_run_args& a) {
  RequireP2p(a.p2p);
  if (a.op < CHORUS_OP_ALL_REDUCE || a.op > CHORUS_OP_BARRIER) {
    Fail(CHORUS_INVALID_ARGUMENT, "ring: unknown collective op ", static_cast<int>(a.op));
  }
  if (a.op == CHORUS_OP_BARRIER) return;
  const char* op = CollectiveOpName(a.op);
  sdk::RequireDtype(a.dtype, op);
  if (a.op == CHORUS_OP_ALL_REDUCE || a.op == CHORUS_OP_REDUCE_SCATTER) {
    sdk::RequireReduceOp(a.op_reduce, op);
  }
  if (a.op == CHORUS_OP_BROADCAST && (a.root < 0 || a.root >= a.p2p->size)) {
    Fail(CHORUS_INVALID_ARGUMENT, "ring broadcast: root ", a.root, " is not a rank of ",
         a.p2p->size);
  }
  // all_gather and reduce_scatter touch size * count elements.
  const size_t ranks = static_cast<size_t>(a.p2p->size);
  if (a.count > std::numeric_limits<size_t>::max() / chorus_dtype_size(a.dtype) / ranks) {
    Fail(CHORUS_INVALID_ARGUMENT, "ring ", op, ": count ", a.count, " is too large");
  }
  if (a.count == 0) return;
  if (a.op != CHORUS_OP_BROADCAST) RequireBuffer(a.send, "send", op);
  RequireBuffer(a.recv, "recv", op);
}

chorus_status Run(const chorus_algorithm_run_args* args) {
  return sdk::Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_algorithm_run_args, num_options), "ring");
    Validate(a);
    const uint64_t segment_bytes =
        sdk::IntegerOption(a.options, a.num_options, "segment_bytes", kRingDefaultSegmentBytes);
    if (segment_bytes == 0) {
      Fail(CHORUS_INVALID_ARGUMENT, "ring: option segment_bytes must be at least 1");
    }
    RingRun run(a, static_cast<size_t>(segment_bytes));
    switch (a.op) {
      case CHORUS_OP_ALL_REDUCE:
        run.AllReduce();
        break;
      case CHORUS_OP_BROADCAST:
        run.Broadcast();
        break;
      case CHORUS_OP_ALL_GATHER:
        run.AllGather();
        break;
      case CHORUS_OP_REDUCE_SCATTER:
        run.ReduceScatter();
        break;
      default:
        run.Barrier();
        break;
    }
  });
}

// Bandwidth-optimal at every size (each rank sends 2(n-1)/n of the buffer), but 2(n-1) steps of
// latency: a general-purpose choice under AUTO, and what a RING request asks for.
uint32_t RingScore(const chorus_score_args* args) {
  switch (args->request) {
    case CHORUS_REQUEST_AUTO:
      return 50;
    case CHORUS_REQUEST_RING:
      return 100;
    default:
      return 0;
  }
}

}  // namespace

const chorus_algorithm_api* RingAlgorithmTable() {
  static const chorus_capabilities capabilities =
      sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, kSupportedOps, RingScore);
  static const chorus_algorithm_api table = [] {
    chorus_algorithm_api t{};
    t.struct_size = sizeof(t);
    t.name = kRingAlgorithmName;
    t.supported_ops = kSupportedOps;
    t.run = Run;
    t.capabilities = &capabilities;
    return t;
  }();
  return &table;
}

}  // namespace chorus::internal
