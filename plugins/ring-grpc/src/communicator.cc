#include "communicator.h"

#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "ring_algorithms.h"

namespace chorus::ring_grpc {

RingCommunicator::RingCommunicator(const CommunicatorConfig& config)
    : rank_(config.rank),
      size_(config.size),
      timeout_ms_(config.timeout_ms),
      segment_bytes_(config.options.segment_bytes) {
  if (size_ == 1) return;  // nothing to connect: every operation is a local copy
  GrpcRingConfig link;
  link.rank = rank_;
  link.size = size_;
  link.store = config.store;
  link.host = config.options.host;
  link.segment_bytes = segment_bytes_;
  link.timeout_ms = timeout_ms_;
  link_ = ConnectGrpcRing(link);
}

RingCommunicator::~RingCommunicator() = default;

void RingCommunicator::FailOperation(const std::string& prefix, chorus_status status,
                                     const std::string& detail) {
  if (aborted_.load()) status = CHORUS_ABORTED;
  const std::string message = prefix + detail;
  {
    std::lock_guard lock(failure_mutex_);
    if (!failure_) failure_.emplace(status, message);
  }
  if (link_ != nullptr) link_->PassFailure(RingFailure{status, rank_, message});
  sdk::Fail(status, message);
}

template <typename Body>
void RingCommunicator::Run(const char* name, Body&& body) {
  std::lock_guard operation(operation_mutex_);
  const uint64_t sequence = next_sequence_;
  const std::string prefix = std::string("ring_grpc ") + name + " (rank " + std::to_string(rank_) +
                             " of " + std::to_string(size_) + ", operation " +
                             std::to_string(sequence) + "): ";
  if (aborted_.load()) sdk::Fail(CHORUS_ABORTED, prefix, "the communicator was aborted");
  {
    std::lock_guard lock(failure_mutex_);
    if (failure_) {
      sdk::Fail(failure_->first, prefix,
                "the communicator failed before and cannot be used; destroy it and create a "
                "new one. The failure: ",
                failure_->second);
    }
  }
  if (sdk::HostAbortRequested()) sdk::Fail(CHORUS_ABORTED, prefix, "the core requested an abort");
  ++next_sequence_;
  try {
    body(OpContext{link_.get(), sequence, timeout_ms_, segment_bytes_});
  } catch (const sdk::Error& e) {
    FailOperation(prefix, e.status(), e.what());
  } catch (const std::bad_alloc&) {
    FailOperation(prefix, CHORUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    FailOperation(prefix, CHORUS_INTERNAL, std::string("internal error: ") + e.what());
  }
}

void RingCommunicator::AllReduce(const void* send, void* recv, size_t count, chorus_dtype dtype,
                                 chorus_reduce_op op) {
  Run("all_reduce", [&](const OpContext& context) {
    if (size_ == 1) {
      if (count > 0 && send != recv) std::memmove(recv, send, count * chorus_dtype_size(dtype));
      return;
    }
    RingAllReduce(context, send, recv, count, dtype, op);
  });
}

void RingCommunicator::Broadcast(void* data, size_t count, chorus_dtype dtype, int32_t root) {
  Run("broadcast", [&](const OpContext& context) {
    if (size_ > 1) RingBroadcast(context, data, count, dtype, root);
  });
}

void RingCommunicator::AllGather(const void* send, void* recv, size_t count, chorus_dtype dtype) {
  Run("all_gather", [&](const OpContext& context) {
    if (size_ == 1) {
      if (count > 0 && send != recv) std::memmove(recv, send, count * chorus_dtype_size(dtype));
      return;
    }
    RingAllGather(context, send, recv, count, dtype);
  });
}

void RingCommunicator::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                     chorus_dtype dtype, chorus_reduce_op op) {
  Run("reduce_scatter", [&](const OpContext& context) {
    if (size_ == 1) {
      if (recv_count > 0 && send != recv) {
        std::memmove(recv, send, recv_count * chorus_dtype_size(dtype));
      }
      return;
    }
    RingReduceScatter(context, send, recv, recv_count, dtype, op);
  });
}

void RingCommunicator::Barrier() {
  Run("barrier", [&](const OpContext& context) {
    if (size_ > 1) RingBarrier(context);
  });
}

void RingCommunicator::Abort() {
  aborted_.store(true);
  if (link_ != nullptr) link_->Abort();
}

}  // namespace chorus::ring_grpc
