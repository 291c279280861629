#include "run_context.h"

#include <cstring>

namespace chorus::algorithms {

RunContext::RunContext(const chorus_algorithm_run_args& args, const char* name, uint64_t tag_base)
    : args_(args),
      p2p_(*args.p2p),
      name_(name),
      tag_base_(tag_base),
      element_bytes_(args.op == CHORUS_OP_BARRIER ? 1 : chorus_dtype_size(args.dtype)) {}

uint8_t* RunContext::Scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    // Not zeroed: every use writes what it reads (a pass of zeros cost a write of the buffer).
    scratch_ = std::make_unique_for_overwrite<uint8_t[]>(bytes);
    scratch_bytes_ = bytes;
  }
  return scratch_.get();
}

void RunContext::Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes, uint64_t tag) {
  sdk::P2pRequests requests(p2p_, name_, args_.timeout_ms);
  requests.Receive(from, tag, recv, recv_bytes);
  requests.Send(to, tag, send, send_bytes);
  requests.WaitAll();
}

void RunContext::Reduce(void* dst, const void* a, const void* b, size_t count) const {
  sdk::ReduceOnHost(dst, a, b, count, args_.dtype, args_.op_reduce);
}

void RunContext::CopySendToRecv() const {
  const size_t bytes = args_.count * element_bytes_;
  if (bytes > 0 && args_.send != args_.recv) std::memcpy(args_.recv, args_.send, bytes);
}

bool RunContext::FoldIn(const Fold& fold, size_t count, uint64_t tag) {
  if (!fold.Folds(rank())) return true;
  const size_t bytes = count * element_bytes_;
  sdk::P2pRequests requests(p2p_, name_, args_.timeout_ms);
  if (rank() % 2 == 0) {
    requests.Send(rank() + 1, tag, recv(), bytes);
    requests.WaitAll();
    return false;
  }
  uint8_t* theirs = Scratch(bytes);
  requests.Receive(rank() - 1, tag, theirs, bytes);
  requests.WaitAll();
  Reduce(recv(), theirs, recv(), count);  // the lower rank's operand first
  return true;
}

void RunContext::FoldOut(const Fold& fold, size_t count, uint64_t tag) {
  if (!fold.Folds(rank())) return;
  const size_t bytes = count * element_bytes_;
  sdk::P2pRequests requests(p2p_, name_, args_.timeout_ms);
  if (rank() % 2 == 0) {
    requests.Receive(rank() + 1, tag, recv(), bytes);
  } else {
    requests.Send(rank() - 1, tag, recv(), bytes);
  }
  requests.WaitAll();
}

void RunContext::RingReduceScatter(const std::vector<int>& group, size_t index, uint8_t* data,
                                   const sdk::BlockLayout& layout, uint64_t tag) {
  const size_t g = group.size();
  if (g < 2) return;
  const int right = group[(index + 1) % g], left = group[(index + g - 1) % g];
  uint8_t* incoming = Scratch((layout.count / g + 1) * element_bytes_);
  for (size_t step = 0; step + 1 < g; ++step) {
    const size_t send_block = (index + g - step) % g;
    const size_t recv_block = (index + 2 * g - step - 1) % g;
    const size_t recv_count = layout.Size(recv_block);
    Exchange(right, data + layout.Begin(send_block) * element_bytes_,
             layout.Size(send_block) * element_bytes_, left, incoming, recv_count * element_bytes_,
             tag | step);
    uint8_t* mine = data + layout.Begin(recv_block) * element_bytes_;
    Reduce(mine, incoming, mine, recv_count);
  }
}

void RunContext::RingAllGather(const std::vector<int>& group, size_t index, uint8_t* data,
                               const sdk::BlockLayout& layout, uint64_t tag) {
  const size_t g = group.size();
  if (g < 2) return;
  const int right = group[(index + 1) % g], left = group[(index + g - 1) % g];
  for (size_t step = 0; step + 1 < g; ++step) {
    const size_t send_block = (index + 1 + g - step) % g;
    const size_t recv_block = (index + g - step) % g;
    Exchange(right, data + layout.Begin(send_block) * element_bytes_,
             layout.Size(send_block) * element_bytes_, left,
             data + layout.Begin(recv_block) * element_bytes_,
             layout.Size(recv_block) * element_bytes_, tag | step);
  }
}

}  // namespace chorus::algorithms
