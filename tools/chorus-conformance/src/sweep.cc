#include "sweep.h"

#include <chorus/base/dtype.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "declarations.h"

namespace chorus::conformance::internal {
namespace {

// `blocks` one after the other.
HostTensor Concatenated(chorus_dtype dtype, const std::vector<HostTensor>& blocks) {
  size_t total = 0;
  for (const auto& block : blocks) total += block.count();
  HostTensor all(dtype, total);
  auto* out = static_cast<unsigned char*>(all.data());
  for (const auto& block : blocks) {
    if (block.bytes() == 0) continue;  // data() of an empty tensor may be NULL
    std::memcpy(out, block.data(), block.bytes());
    out += block.bytes();
  }
  return all;
}

bool Reduces(chorus_collective_op op) {
  return op == CHORUS_OP_ALL_REDUCE || op == CHORUS_OP_REDUCE_SCATTER;
}

}  // namespace

HostTensor Input(chorus_dtype dtype, Pattern pattern, int rank, size_t count, size_t offset) {
  HostTensor t(dtype, count);
  if (count == 0) return t;
  HostTensor period(dtype, std::min(count, kPeriod));
  period.Fill(pattern, static_cast<size_t>(rank), offset);
  std::memcpy(t.data(), period.data(), period.bytes());
  t.Repeat(period.count());
  return t;
}

std::string Describe(const OpCase& c) {
  std::ostringstream s;
  s << CollectiveOpName(c.op);
  if (c.op == CHORUS_OP_BARRIER) return s.str();
  s << " " << DtypeName(c.dtype);
  if (Reduces(c.op)) s << " " << ReduceOpName(c.reduce);
  s << " count " << c.count;
  if (c.op == CHORUS_OP_BROADCAST) s << " from rank " << c.root;
  if (c.in_place) s << " in place";
  return s.str();
}

std::vector<OpCase> Cases(chorus_collective_op op, int size, const CountsOf& counts,
                          const std::vector<bool>& placements) {
  std::vector<OpCase> cases;
  if (op == CHORUS_OP_BARRIER) {
    OpCase c;
    c.op = op;
    cases.push_back(c);
    return cases;
  }
  const bool placed = op == CHORUS_OP_ALL_REDUCE || op == CHORUS_OP_ALL_GATHER;
  const std::vector<bool> out_of_place_only = {false};
  const std::vector<chorus_reduce_op> sum_only = {CHORUS_REDUCE_SUM};
  for (chorus_dtype dtype : Dtypes()) {
    for (chorus_reduce_op reduce : Reduces(op) ? PluginReduceOps() : sum_only) {
      for (size_t count : counts(dtype)) {
        if (!InSweep(dtype, reduce, count)) continue;
        for (int root = 0; root < (op == CHORUS_OP_BROADCAST ? size : 1); ++root) {
          for (bool in_place : placed ? placements : out_of_place_only) {
            OpCase c;
            c.op = op;
            c.dtype = dtype;
            c.reduce = reduce;
            c.count = count;
            c.root = root;
            c.in_place = in_place;
            cases.push_back(c);
          }
        }
      }
    }
  }
  return cases;
}

CaseBuffers::CaseBuffers(const OpCase& c, int rank, int size)
    : case_(c), rank_(rank), send_(c.dtype, 0), recv_(c.dtype, 0), expected_(c.dtype, 0) {
  const size_t ranks = static_cast<size_t>(size);
  const Pattern pattern = PatternFor(c.reduce);
  switch (c.op) {
    case CHORUS_OP_ALL_REDUCE: {
      std::vector<HostTensor> inputs;
      for (int r = 0; r < size; ++r) inputs.push_back(Input(c.dtype, pattern, r, c.count));
      expected_ = ExpectedReduce(c.reduce, inputs);
      send_ = std::move(inputs[static_cast<size_t>(rank)]);
      if (!c.in_place) recv_ = HostTensor(c.dtype, c.count);
      break;
    }
    case CHORUS_OP_BROADCAST:
      expected_ = Input(c.dtype, Pattern::kData, c.root, c.count);
      recv_ = rank == c.root ? expected_ : HostTensor(c.dtype, c.count);
      break;
    case CHORUS_OP_ALL_GATHER: {
      std::vector<HostTensor> blocks;
      for (int r = 0; r < size; ++r) blocks.push_back(Input(c.dtype, Pattern::kData, r, c.count));
      expected_ = Concatenated(c.dtype, blocks);
      recv_ = HostTensor(c.dtype, c.count * ranks);
      if (c.in_place) {
        const HostTensor& own = blocks[static_cast<size_t>(rank)];
        auto* block =
            static_cast<unsigned char*>(recv_.data()) + static_cast<size_t>(rank) * own.bytes();
        if (own.bytes() > 0) std::memcpy(block, own.data(), own.bytes());
      } else {
        send_ = std::move(blocks[static_cast<size_t>(rank)]);
      }
      break;
    }
    case CHORUS_OP_REDUCE_SCATTER: {
      // Block `rank` of every rank's input, reduced, is what this rank must receive.
      std::vector<HostTensor> blocks;
      for (int r = 0; r < size; ++r) {
        blocks.push_back(Input(c.dtype, pattern, r, c.count, static_cast<size_t>(rank) * c.count));
      }
      expected_ = ExpectedReduce(c.reduce, blocks);
      send_ = Input(c.dtype, pattern, rank, c.count * ranks);
      recv_ = HostTensor(c.dtype, c.count);
      break;
    }
    default:
      break;
  }
}

const void* CaseBuffers::send() const {
  switch (case_.op) {
    case CHORUS_OP_BROADCAST:
    case CHORUS_OP_BARRIER:
      return nullptr;
    case CHORUS_OP_ALL_GATHER:
      if (case_.in_place) {
        return static_cast<const unsigned char*>(recv_.data()) +
               static_cast<size_t>(rank_) * case_.count * chorus_dtype_size(case_.dtype);
      }
      return send_.data();
    default:
      return send_.data();
  }
}

void* CaseBuffers::recv() {
  if (case_.op == CHORUS_OP_ALL_REDUCE && case_.in_place) return send_.data();
  return case_.op == CHORUS_OP_BARRIER ? nullptr : recv_.data();
}

std::string CaseBuffers::Check() const {
  if (case_.op == CHORUS_OP_BARRIER) return "";
  const HostTensor& result = case_.op == CHORUS_OP_ALL_REDUCE && case_.in_place ? send_ : recv_;
  const auto same = SameValues(result, expected_);
  if (same) return "";
  const char* want = "";
  switch (case_.op) {
    case CHORUS_OP_ALL_REDUCE:
      want = "recv must hold the elementwise reduction of every rank's send";
      break;
    case CHORUS_OP_BROADCAST:
      want = "every rank's data must end up holding the root's count elements";
      break;
    case CHORUS_OP_ALL_GATHER:
      want = "recv must hold every rank's send of count elements, in rank order";
      break;
    case CHORUS_OP_REDUCE_SCATTER:
      want =
          "rank r's recv must hold block r (recv_count elements) of the reduction of every "
          "rank's send";
      break;
    default:
      break;
  }
  return Describe(case_) + ": " + same.message() + "\n  plugin.h: " + want;
}

}  // namespace chorus::conformance::internal
