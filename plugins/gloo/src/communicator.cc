#include "communicator.h"

#include <chorus/plugin_sdk.hpp>
#include <string_view>

#include "connect.h"
#include "gloo_errors.h"

namespace chorus::gloo_plugin {

using sdk::Fail;

GlooCommunicator::GlooCommunicator(const chorus_communicator_create_args& a) {
  constexpr const char* kWhat = "gloo create";
  if (a.size < 1) Fail(CHORUS_INVALID_ARGUMENT, kWhat, ": size ", a.size, " is not positive");
  if (a.rank < 0 || a.rank >= a.size) {
    Fail(CHORUS_INVALID_ARGUMENT, kWhat, ": rank ", a.rank, " is not in 0..", a.size - 1);
  }
  if (a.timeout_ms <= 0) {
    Fail(CHORUS_INVALID_ARGUMENT, kWhat, ": timeout_ms ", a.timeout_ms,
         " is not positive (Gloo would read 0 as no time-out at all)");
  }
  const chorus_kv_store* store = a.store;
  if (store == nullptr) Fail(CHORUS_INVALID_ARGUMENT, kWhat, ": store is NULL");
  if (store->struct_size < CHORUS_STRUCT_SIZE(chorus_kv_store, wait) || store->set == nullptr ||
      store->get == nullptr || store->wait == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, kWhat, ": the store lacks set, get or wait");
  }
  if (CHORUS_HAS_FIELD(&a, chorus_communicator_create_args, devices_api) &&
      a.devices_api != nullptr) {
    const char* platform = a.devices_api->platform != nullptr ? a.devices_api->platform : "?";
    // A cpu enumerator's device memory is host memory; every other platform's is not.
    if (std::string_view(platform) != "cpu") {
      Fail(CHORUS_UNSUPPORTED, kWhat, ": gloo moves host memory only, not the '", platform,
           "' device enumerator's buffers");
    }
  }
  CommunicatorOptions options = ParseOptions(a.options, a.num_options);
  // Without an option, listen at the address the cluster spec gives this rank (1.1).
  if (options.hostname.empty() && options.interface.empty()) {
    options.hostname = std::string(sdk::CreateAddress(a));
  }
  rank_ = a.rank;
  size_ = a.size;
  timeout_ms_ = a.timeout_ms;
  algorithm_ = options.algorithm;
  context_ = Connect(*store, rank_, size_, timeout_ms_, options);
}

GlooCommunicator::~GlooCommunicator() {
  if (ran_ring_chunked_ && failed_status_ == CHORUS_OK && !aborted_.load() &&
      !sdk::HostAbortRequested()) {
    try {
      gloo_plugin::Barrier(context_, next_tag_++);
    } catch (const std::exception& e) {
      sdk::Log(CHORUS_LOG_DEBUG, Describe("destroy") + ": the closing barrier failed: " + e.what());
    }
  }
  context_.reset();  // closes the connections
}

std::string GlooCommunicator::Describe(const char* operation) const {
  return std::string("gloo ") + operation + " (rank " + std::to_string(rank_) + " of " +
         std::to_string(size_) + ")";
}

void GlooCommunicator::FailIfAborted(const std::string& what) const {
  if (aborted_.load()) Fail(CHORUS_ABORTED, what, ": the communicator was aborted");
  if (sdk::HostAbortRequested())
    Fail(CHORUS_ABORTED, what, ": the core asked every operation to stop");
}

void GlooCommunicator::FailInsideGloo(const std::string& what) {
  // The communicator is unusable from here on; closing every connection before the caller gets
  // its buffers back keeps Gloo's device thread from writing into them afterwards.
  try {
    context_->closeConnections();
  } catch (const std::exception& e) {
    sdk::Log(CHORUS_LOG_WARN, what + ": closing the connections failed: " + e.what());
  }
  sdk::Error error = TranslateCurrentException(what, timeout_ms_);
  if (aborted_.load() || sdk::HostAbortRequested()) {
    std::string_view detail = error.what();
    if (detail.starts_with(what + ": ")) detail.remove_prefix(what.size() + 2);
    error = sdk::Error(CHORUS_ABORTED, what +
                                           ": the communicator was aborted while the operation "
                                           "ran, which then ended with: " +
                                           std::string(detail));
  }
  failed_status_ = error.status();
  failed_message_ = error.what();
  throw error;
}

template <typename Body>
void GlooCommunicator::Run(const char* operation, const CallSignature& call, Body&& body) {
  const std::string what = Describe(operation);
  FailIfAborted(what);
  std::lock_guard<std::mutex> lock(mutex_);
  FailIfAborted(what);  // abort may have come while this call waited for the lock
  if (failed_status_ != CHORUS_OK) {
    Fail(failed_status_, what,
         ": the communicator is unusable after an earlier failure (destroy it and create a new "
         "one); that failure: ",
         failed_message_);
  }
  if (size_ > 1) {
    std::vector<CallSignature> calls;
    try {
      calls = GatherCalls(context_, call, next_tag_++);
    } catch (...) {
      FailInsideGloo(what);
    }
    // Every rank gathered the same calls, so every rank fails here alike, and no data moved.
    if (const std::string mismatch = CallMismatch(calls); !mismatch.empty()) {
      Fail(CHORUS_INVALID_ARGUMENT, what, ": ", mismatch);
    }
  }
  try {
    body();
  } catch (...) {
    FailInsideGloo(what);
  }
}

void GlooCommunicator::AllReduce(const chorus_all_reduce_args& a) {
  if (a.count == 0) return FailIfAborted(Describe("all_reduce"));  // every rank passes count 0
  Run("all_reduce",
      {.op = static_cast<int64_t>(CallOp::kAllReduce),
       .count = static_cast<int64_t>(a.count),
       .dtype = a.dtype,
       .reduce = a.op},
      [&] {
        ran_ring_chunked_ |= algorithm_ == Algorithm::kRingChunked;
        gloo_plugin::AllReduce(context_, algorithm_, a.send, a.recv, a.count, a.dtype, a.op,
                               next_tag_++);
      });
}

void GlooCommunicator::Broadcast(const chorus_collective_broadcast_args& a) {
  if (a.count == 0) return FailIfAborted(Describe("broadcast"));
  Run("broadcast",
      {.op = static_cast<int64_t>(CallOp::kBroadcast),
       .count = static_cast<int64_t>(a.count),
       .dtype = a.dtype,
       .root = a.root},
      [&] { gloo_plugin::Broadcast(context_, a.data, a.count, a.dtype, a.root, next_tag_++); });
}

void GlooCommunicator::AllGather(const chorus_collective_all_gather_args& a) {
  if (a.count == 0) return FailIfAborted(Describe("all_gather"));
  Run("all_gather",
      {.op = static_cast<int64_t>(CallOp::kAllGather),
       .count = static_cast<int64_t>(a.count),
       .dtype = a.dtype},
      [&] { gloo_plugin::AllGather(context_, a.send, a.recv, a.count, a.dtype, next_tag_++); });
}

void GlooCommunicator::ReduceScatter(const chorus_reduce_scatter_args& a) {
  if (a.recv_count == 0) return FailIfAborted(Describe("reduce_scatter"));
  Run("reduce_scatter",
      {.op = static_cast<int64_t>(CallOp::kReduceScatter),
       .count = static_cast<int64_t>(a.recv_count),
       .dtype = a.dtype,
       .reduce = a.op},
      [&] {
        ran_ring_chunked_ |= algorithm_ == Algorithm::kRingChunked;
        gloo_plugin::ReduceScatter(context_, algorithm_, a.send, a.recv, a.recv_count, a.dtype,
                                   a.op, next_tag_++);
      });
}

void GlooCommunicator::Barrier() {
  Run("barrier", {.op = static_cast<int64_t>(CallOp::kBarrier)},
      [&] { gloo_plugin::Barrier(context_, next_tag_++); });
}

void GlooCommunicator::Abort() noexcept {
  if (aborted_.exchange(true)) return;
  try {
    context_->closeConnections();  // each pair under its own lock: safe beside a running call
  } catch (const std::exception& e) {
    sdk::Log(CHORUS_LOG_WARN, Describe("abort") + ": closing the connections failed: " + e.what());
  }
}

}  // namespace chorus::gloo_plugin
