// PsClient: the calls of the coordinator and of workers' functions to the ps tasks. Shards on
// one ps go in one RPC; RPCs to different ps tasks run in parallel (gRPC's callback API).
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <thread>

#include "ps_internal.h"

namespace chorus::ps_internal {
namespace {

// The indices of `shards` grouped by their ps.
std::map<int, std::vector<size_t>> ByPs(const std::vector<ShardPlacement>& shards) {
  std::map<int, std::vector<size_t>> groups;
  for (size_t i = 0; i < shards.size(); ++i) groups[shards[i].ps].push_back(i);
  return groups;
}

// One RPC per ps in flight at once; Wait() returns when all have finished and throws the first
// failure, naming its ps.
class ParallelCalls {
 public:
  ParallelCalls(const PsClient& client, std::string what) : client_(client), what_(what) {}

  // `start` issues the call with the given context and completion callback.
  void Start(
      int ps,
      const std::function<void(grpc::ClientContext*, std::function<void(grpc::Status)>)>& start) {
    auto call = std::make_unique<Call>();
    call->ps = ps;
    SetDeadline(call->context, client_.timeout());
    Call* raw = call.get();
    {
      std::lock_guard lock(mutex_);
      calls_.push_back(std::move(call));
      ++pending_;
    }
    start(&raw->context, [this, raw](grpc::Status status) {
      std::lock_guard lock(mutex_);
      raw->status = std::move(status);
      if (--pending_ == 0) done_.notify_all();
    });
  }

  void Wait() {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    for (const auto& call : calls_) {
      if (call->status.ok()) continue;
      const std::string who = client_.TaskName(call->ps);
      try {
        ThrowRpcError(call->status, who, what_);
      } catch (const Error& e) {
        if (IsTransportFailure(call->status)) throw PsUnavailable(e.status(), e.what(), call->ps);
        throw;
      }
    }
  }

 private:
  struct Call {
    int ps = 0;
    grpc::ClientContext context;
    grpc::Status status;
  };
  const PsClient& client_;
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_;
  int pending_ = 0;
  std::vector<std::unique_ptr<Call>> calls_;
};

}  // namespace

PsClient::PsClient(std::vector<std::string> ps_addresses, Milliseconds timeout)
    : addresses_(std::move(ps_addresses)), timeout_(timeout) {
  for (const std::string& address : addresses_) {
    stubs_.push_back(rpc::Task::NewStub(MakeChannel(address)));
  }
}

std::string PsClient::TaskName(int ps) const {
  return "ps " + std::to_string(ps) + " at " + address(ps);
}

void PsClient::WaitForAll(Milliseconds timeout) const {
  for (int ps = 0; ps < num_ps(); ++ps) {
    grpc::ClientContext context;
    SetDeadline(context, timeout);
    context.set_wait_for_ready(true);
    rpc::Empty request;
    rpc::PingReply reply;
    const grpc::Status status = stub(ps).Ping(&context, request, &reply);
    if (!status.ok()) {
      if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        throw PsUnavailable(CHORUS_TIMEOUT,
                            TaskName(ps) + " did not answer within " +
                                std::to_string(timeout.count()) +
                                " ms; is it started (TF_CONFIG task type \"ps\") and serving "
                                "(ServeIfServerTask)? raise CHORUS_TIMEOUT_SECONDS if it starts "
                                "slowly",
                            ps);
      }
      ThrowRpcError(status, TaskName(ps), "a ping");
    }
    if (!reply.task().starts_with("ps ")) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  TaskName(ps) + " answers as '" + reply.task() +
                      "', not as a ps; check TF_CONFIG's \"ps\" addresses");
    }
  }
}

void PsClient::SetOptimizer(const rpc::OptimizerConfig& config) const {
  rpc::SetOptimizerRequest request;
  *request.mutable_optimizer() = config;
  std::vector<rpc::Empty> replies(addresses_.size());
  ParallelCalls calls(*this, "setting the optimizer");
  for (int ps = 0; ps < num_ps(); ++ps) {
    calls.Start(ps, [&, ps](grpc::ClientContext* context, auto done) {
      stub(ps).async()->SetOptimizer(context, &request, &replies[static_cast<size_t>(ps)], done);
    });
  }
  calls.Wait();
}

void PsClient::CreateShards(const VariableInfo& info, const Tensor& initial) const {
  const std::vector<Tensor> parts = SplitRows(initial, info.shards);
  std::map<int, rpc::CreateShardsRequest> requests;
  for (size_t i = 0; i < info.shards.size(); ++i) {
    rpc::CreateShardsRequest& request = requests[info.shards[i].ps];
    request.add_ids(info.shards[i].id);
    request.add_names(info.name + "/part_" + std::to_string(i));
    ToProto(parts[i], request.add_initial());
  }
  std::map<int, rpc::Empty> replies;
  for (const auto& [ps, request] : requests) replies[ps];
  ParallelCalls calls(*this, "creating variable '" + info.name + "'");
  for (auto& [ps, request] : requests) {
    calls.Start(ps, [&, ps = ps](grpc::ClientContext* context, auto done) {
      stub(ps).async()->CreateShards(context, &requests.at(ps), &replies.at(ps), done);
    });
  }
  calls.Wait();
}

// Bytes of a shard of `shards`, for choosing between one message and a stream (f32 assumed:
// the choice only needs the order of magnitude).
int64_t TotalElements(const std::vector<ShardPlacement>& shards) {
  int64_t total = 0;
  for (const ShardPlacement& shard : shards) total += NumElements(shard.shape);
  return total;
}

// Runs body(ps, indices) on a thread per ps and rethrows the first failure.
void OnThreadPerPs(const std::map<int, std::vector<size_t>>& groups,
                   const std::function<void(int, const std::vector<size_t>&)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> failures(groups.size());
  size_t k = 0;
  for (const auto& [ps, indices] : groups) {
    threads.emplace_back([&, ps = ps, k] {
      try {
        body(ps, groups.at(ps));
      } catch (...) {
        failures[k] = std::current_exception();
      }
    });
    ++k;
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

std::vector<Tensor> PsClient::ReadStreamed(const std::vector<ShardPlacement>& shards) const {
  std::vector<Tensor> values(shards.size());
  OnThreadPerPs(ByPs(shards), [&](int ps, const std::vector<size_t>& indices) {
    grpc::ClientContext context;
    SetDeadline(context, timeout_);
    rpc::ShardIds request;
    for (size_t i : indices) request.add_ids(shards[i].id);
    auto reader = stub(ps).ReadStream(&context, request);
    rpc::ShardChunk chunk;
    size_t next = 0;  // position in indices of the shard being received
    std::vector<uint8_t> staging;
    while (reader->Read(&chunk)) {
      if (chunk.offset() == 0) {
        if (next >= indices.size() || shards[indices[next]].id != chunk.id()) break;
        values[indices[next]] =
            Tensor(HostDevice(), static_cast<chorus_dtype>(chunk.dtype()), ShapeOf(chunk.shape()));
        ++next;
      }
      const Tensor& value = values[indices[next - 1]];
      if (chunk.offset() + static_cast<int64_t>(chunk.data().size()) >
          static_cast<int64_t>(value.bytes())) {
        break;
      }
      std::memcpy(static_cast<uint8_t*>(value.raw()) + chunk.offset(), chunk.data().data(),
                  chunk.data().size());
    }
    const grpc::Status status = reader->Finish();
    if (!status.ok()) {
      try {
        ThrowRpcError(status, TaskName(ps), "a read");
      } catch (const Error& e) {
        if (IsTransportFailure(status)) throw PsUnavailable(e.status(), e.what(), ps);
        throw;
      }
    }
    if (next != indices.size()) {
      throw Error(CHORUS_INTERNAL, TaskName(ps) + " streamed a read out of order");
    }
  });
  return values;
}

void PsClient::UpdateStreamed(rpc::UpdateRequest::Kind kind,
                              const std::vector<ShardPlacement>& shards,
                              const std::vector<Tensor>& values) const {
  OnThreadPerPs(ByPs(shards), [&](int ps, const std::vector<size_t>& indices) {
    grpc::ClientContext context;
    SetDeadline(context, timeout_);
    rpc::Empty reply;
    auto writer = stub(ps).UpdateStream(&context, &reply);
    rpc::ShardChunk chunk;
    for (size_t i : indices) {
      const Tensor& value = values[i];
      const auto* bytes = static_cast<const char*>(value.raw());
      const auto total = static_cast<int64_t>(value.bytes());
      int64_t offset = 0;
      do {
        chunk.Clear();
        chunk.set_id(shards[i].id);
        chunk.set_offset(offset);
        chunk.set_kind(kind);
        if (offset == 0) {
          chunk.set_total_bytes(total);
          chunk.set_dtype(static_cast<int32_t>(value.dtype()));
          chunk.mutable_shape()->Assign(value.shape().begin(), value.shape().end());
        }
        const int64_t size = std::min(kStreamChunkBytes, total - offset);
        chunk.set_data(bytes + offset, static_cast<size_t>(size));
        if (!writer->Write(chunk)) break;  // Finish says why
        offset += size;
      } while (offset < total);
    }
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (!status.ok()) {
      try {
        ThrowRpcError(status, TaskName(ps), "an assignment");
      } catch (const Error& e) {
        if (IsTransportFailure(status)) throw PsUnavailable(e.status(), e.what(), ps);
        throw;
      }
    }
  });
}

std::vector<Tensor> PsClient::Read(const std::vector<ShardPlacement>& shards) const {
  if (TotalElements(shards) * 4 > kStreamChunkBytes) return ReadStreamed(shards);
  const auto groups = ByPs(shards);
  std::map<int, rpc::ShardIds> requests;
  std::map<int, rpc::ShardValues> replies;
  for (const auto& [ps, indices] : groups) {
    for (size_t i : indices) requests[ps].add_ids(shards[i].id);
    replies[ps];
  }
  ParallelCalls calls(*this, "a read");
  for (const auto& [ps, indices] : groups) {
    calls.Start(ps, [&, ps = ps](grpc::ClientContext* context, auto done) {
      stub(ps).async()->Read(context, &requests.at(ps), &replies.at(ps), done);
    });
  }
  calls.Wait();
  std::vector<Tensor> values(shards.size());
  for (const auto& [ps, indices] : groups) {
    const rpc::ShardValues& reply = replies.at(ps);
    if (reply.values_size() != static_cast<int>(indices.size())) {
      throw Error(CHORUS_INTERNAL, TaskName(ps) + " returned " +
                                       std::to_string(reply.values_size()) + " values for " +
                                       std::to_string(indices.size()) + " shards");
    }
    for (size_t k = 0; k < indices.size(); ++k) {
      values[indices[k]] =
          FromProto(reply.values(static_cast<int>(k)), "a value from " + TaskName(ps));
    }
  }
  return values;
}

void PsClient::Update(rpc::UpdateRequest::Kind kind, const std::vector<ShardPlacement>& shards,
                      const std::vector<Tensor>& values) const {
  if (TotalElements(shards) * 4 > kStreamChunkBytes) return UpdateStreamed(kind, shards, values);
  const auto groups = ByPs(shards);
  std::map<int, rpc::UpdateRequest> requests;
  std::map<int, rpc::Empty> replies;
  for (const auto& [ps, indices] : groups) {
    rpc::UpdateRequest& request = requests[ps];
    request.set_kind(kind);
    for (size_t i : indices) {
      request.add_ids(shards[i].id);
      ToProto(values[i], request.add_values());
    }
    replies[ps];
  }
  ParallelCalls calls(
      *this, kind == rpc::UpdateRequest::APPLY_GRADIENT ? "an optimizer update" : "an assignment");
  for (const auto& [ps, indices] : groups) {
    calls.Start(ps, [&, ps = ps](grpc::ClientContext* context, auto done) {
      stub(ps).async()->Update(context, &requests.at(ps), &replies.at(ps), done);
    });
  }
  calls.Wait();
}

std::vector<rpc::SlotState> PsClient::ReadSlots(const std::vector<ShardPlacement>& shards) const {
  const auto groups = ByPs(shards);
  std::map<int, rpc::ShardIds> requests;
  std::map<int, rpc::SlotStates> replies;
  for (const auto& [ps, indices] : groups) {
    for (size_t i : indices) requests[ps].add_ids(shards[i].id);
    replies[ps];
  }
  ParallelCalls calls(*this, "reading optimizer slots");
  for (const auto& [ps, indices] : groups) {
    calls.Start(ps, [&, ps = ps](grpc::ClientContext* context, auto done) {
      stub(ps).async()->ReadSlots(context, &requests.at(ps), &replies.at(ps), done);
    });
  }
  calls.Wait();
  std::vector<rpc::SlotState> states(shards.size());
  for (const auto& [ps, indices] : groups) {
    for (size_t k = 0; k < indices.size(); ++k) {
      states[indices[k]] = replies.at(ps).shards(static_cast<int>(k));
    }
  }
  return states;
}

void PsClient::WriteSlots(const std::vector<ShardPlacement>& shards,
                          const std::vector<rpc::SlotState>& states) const {
  const auto groups = ByPs(shards);
  std::map<int, rpc::SlotStates> requests;
  std::map<int, rpc::Empty> replies;
  for (const auto& [ps, indices] : groups) {
    for (size_t i : indices) *requests[ps].add_shards() = states[i];
    replies[ps];
  }
  ParallelCalls calls(*this, "writing optimizer slots");
  for (const auto& [ps, indices] : groups) {
    calls.Start(ps, [&, ps = ps](grpc::ClientContext* context, auto done) {
      stub(ps).async()->WriteSlots(context, &requests.at(ps), &replies.at(ps), done);
    });
  }
  calls.Wait();
}

void PsClient::ShutdownAll() const {
  for (int ps = 0; ps < num_ps(); ++ps) {
    grpc::ClientContext context;
    SetDeadline(context, std::chrono::seconds(2));
    rpc::Empty request, reply;
    stub(ps).Shutdown(&context, request, &reply);  // best effort: a dead ps is fine
  }
}

}  // namespace chorus::ps_internal
