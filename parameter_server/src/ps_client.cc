// PsClient: the calls of the coordinator and of workers' functions to the ps tasks. Shards on
// one ps go in one RPC; RPCs to different ps tasks run in parallel (gRPC's callback API).
#include <algorithm>
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
    call->deadline = client_.Prepare(call->context);
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
    std::vector<std::pair<int, PsClient::CallDeadline>> cut_by_run;
    for (const auto& call : calls_) {
      if (call->status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
          call->deadline.by_run) {
        cut_by_run.emplace_back(call->ps, call->deadline);
      }
    }
    if (cut_by_run.size() > 1) client_.ThrowRunDeadline(cut_by_run, what_);
    for (const auto& call : calls_) {
      if (call->status.ok()) continue;
      client_.ThrowCallError(call->status, call->ps, what_, call->deadline);
    }
  }

 private:
  struct Call {
    int ps = 0;
    PsClient::CallDeadline deadline;
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

// The ids of `shards` in one request per ps.
std::map<int, rpc::ShardIds> IdsByPs(const std::map<int, std::vector<size_t>>& groups,
                                     const std::vector<ShardPlacement>& shards) {
  std::map<int, rpc::ShardIds> requests;
  for (const auto& [ps, indices] : groups) {
    for (size_t i : indices) requests[ps].add_ids(shards[i].id);
  }
  return requests;
}

// One unary call per ps in `requests`, in parallel: call(async stub, context, request, reply,
// done) issues it (the method's name is all that differs between callers).
template <typename Request, typename Reply, typename Call>
void CallEachPs(const PsClient& client, const std::string& what, std::map<int, Request>& requests,
                std::map<int, Reply>& replies, Call call) {
  ParallelCalls calls(client, what);
  for (auto& [ps, request] : requests) {
    Reply* reply = &replies[ps];
    calls.Start(ps,
                [&, ps = ps, request = &request, reply](grpc::ClientContext* context, auto done) {
                  call(client.stub(ps).async(), context, request, reply, done);
                });
  }
  calls.Wait();
}

}  // namespace

PsClient::PsClient(std::vector<std::string> ps_addresses, Milliseconds timeout)
    : addresses_(std::move(ps_addresses)),
      timeout_(timeout),
      credential_(JobCredentialFor(kCredentialPurpose, "")) {
  auto stubs = std::make_shared<std::vector<std::unique_ptr<rpc::Task::Stub>>>();
  for (const std::string& address : addresses_) {
    stubs->push_back(rpc::Task::NewStub(MakeChannel(address)));
  }
  stubs_ = std::move(stubs);
}

std::shared_ptr<PsClient> PsClient::ForRun(Milliseconds timeout, TimePoint run_deadline) const {
  auto client = std::make_shared<PsClient>(*this);
  client->timeout_ = timeout;
  client->run_deadline_ = run_deadline;
  return client;
}

PsClient::CallDeadline PsClient::Prepare(grpc::ClientContext& context) const {
  CallDeadline deadline;
  deadline.started = std::chrono::system_clock::now();
  deadline.at = deadline.started + timeout_;
  if (run_deadline_ && *run_deadline_ < deadline.at) {
    deadline.at = std::max(*run_deadline_, deadline.started);
    deadline.by_run = true;
  }
  PrepareCall(context, deadline.at, credential_);
  return deadline;
}

void PsClient::ThrowRunDeadline(const std::vector<std::pair<int, CallDeadline>>& unanswered,
                                const std::string& what) const {
  std::string who;
  for (size_t i = 0; i < unanswered.size(); ++i) {
    const auto& [ps, deadline] = unanswered[i];
    who += (i == 0                       ? ""
            : i + 1 == unanswered.size() ? " and "
                                         : ", ") +
           TaskName(ps) + " (after " + Seconds(deadline.at - deadline.started) + ")";
  }
  throw RunDeadlineExceeded(who + " had not answered " + what + " when the run's deadline came");
}

void PsClient::ThrowCallError(const grpc::Status& status, int ps, const std::string& what,
                              const CallDeadline& deadline) const {
  const std::string who = TaskName(ps);
  const std::string waited = Seconds(deadline.at - deadline.started);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && deadline.by_run) {
    throw RunDeadlineExceeded(who + " had not answered " + what + " after " + waited +
                              " when the run's deadline came");
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    throw PsUnavailable(CHORUS_TIMEOUT,
                        who + " did not answer " + what + " within " + waited +
                            " (CHORUS_TIMEOUT_SECONDS): it is stopped or hung, or slower than "
                            "the time-out allows (then raise CHORUS_TIMEOUT_SECONDS)",
                        ps);
  }
  try {
    ThrowRpcError(status, who, what);
  } catch (const Error& e) {
    if (IsTransportFailure(status)) throw PsUnavailable(e.status(), e.what(), ps);
    throw;
  }
}

std::string PsClient::TaskName(int ps) const {
  return "ps " + std::to_string(ps) + " at " + address(ps);
}

void PsClient::WaitForAll(Milliseconds timeout) const {
  for (int ps = 0; ps < num_ps(); ++ps)
    AwaitTask(stub(ps), TaskName(ps), "ps", timeout, credential_);
}

void PsClient::SetOptimizer(const rpc::OptimizerConfig& config) const {
  std::map<int, rpc::SetOptimizerRequest> requests;
  std::map<int, rpc::Empty> replies;
  for (int ps = 0; ps < num_ps(); ++ps) *requests[ps].mutable_optimizer() = config;
  CallEachPs(*this, "setting the optimizer", requests, replies,
             [](auto* async, auto* context, auto* request, auto* reply, auto done) {
               async->SetOptimizer(context, request, reply, done);
             });
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
  CallEachPs(*this, "creating variable '" + info.name + "'", requests, replies,
             [](auto* async, auto* context, auto* request, auto* reply, auto done) {
               async->CreateShards(context, request, reply, done);
             });
}

namespace {

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

// A streaming call's status as PsClient's errors.
void CheckStream(const PsClient& client, const grpc::Status& status, int ps, const char* what,
                 const PsClient::CallDeadline& deadline) {
  if (!status.ok()) client.ThrowCallError(status, ps, what, deadline);
}

}  // namespace

void PsClient::ReadStreamed(const std::vector<ShardPlacement>& shards,
                            const std::vector<MutableBytes>& destinations) const {
  OnThreadPerPs(ByPs(shards), [&](int ps, const std::vector<size_t>& indices) {
    grpc::ClientContext context;
    const CallDeadline deadline = Prepare(context);
    rpc::ShardIds request;
    for (size_t i : indices) request.add_ids(shards[i].id);
    auto reader = stub(ps).ReadStream(&context, request);
    rpc::ShardChunk chunk;
    size_t next = 0;  // position in indices of the next shard to arrive
    bool in_order = true;
    while (in_order && reader->Read(&chunk)) {
      if (chunk.offset() == 0) {
        in_order = next < indices.size() && shards[indices[next]].id == chunk.id() &&
                   static_cast<size_t>(chunk.total_bytes()) == destinations[indices[next]].size;
        ++next;
      }
      const MutableBytes& into = destinations[indices[next - 1]];
      in_order = in_order && chunk.offset() >= 0 &&
                 static_cast<size_t>(chunk.offset()) + chunk.data().size() <= into.size;
      if (in_order) {
        std::memcpy(static_cast<uint8_t*>(into.data) + chunk.offset(), chunk.data().data(),
                    chunk.data().size());
      }
    }
    if (!in_order) context.TryCancel();
    CheckStream(*this, reader->Finish(), ps, "a read", deadline);
    if (!in_order || next != indices.size()) {
      throw Error(CHORUS_INTERNAL, TaskName(ps) +
                                       " streamed a read that does not match the "
                                       "shards asked for");
    }
  });
}

void PsClient::UpdateStreamed(rpc::UpdateRequest::Kind kind, chorus_dtype dtype,
                              const std::vector<ShardPlacement>& shards,
                              const std::vector<ConstBytes>& sources) const {
  OnThreadPerPs(ByPs(shards), [&](int ps, const std::vector<size_t>& indices) {
    grpc::ClientContext context;
    const CallDeadline deadline = Prepare(context);
    rpc::Empty reply;
    auto writer = stub(ps).UpdateStream(&context, &reply);
    rpc::ShardChunk chunk;
    bool open = true;
    for (size_t k = 0; k < indices.size() && open; ++k) {
      const size_t i = indices[k];
      const auto* bytes = static_cast<const char*>(sources[i].data);
      const auto total = static_cast<int64_t>(sources[i].size);
      int64_t offset = 0;
      do {
        chunk.Clear();
        chunk.set_id(shards[i].id);
        chunk.set_offset(offset);
        chunk.set_kind(kind);
        if (offset == 0) {
          chunk.set_total_bytes(total);
          chunk.set_dtype(static_cast<int32_t>(dtype));
          chunk.mutable_shape()->Assign(shards[i].shape.begin(), shards[i].shape.end());
        }
        const int64_t size = std::min(kStreamChunkBytes, total - offset);
        chunk.set_data(bytes + offset, static_cast<size_t>(size));
        open = writer->Write(chunk);  // false: the call failed, Finish says why
        offset += size;
      } while (open && offset < total);
    }
    if (open) writer->WritesDone();
    CheckStream(
        *this, writer->Finish(), ps,
        kind == rpc::UpdateRequest::APPLY_GRADIENT ? "an optimizer update" : "an assignment",
        deadline);
  });
}

void PsClient::ReadInto(const std::vector<ShardPlacement>& shards,
                        const std::vector<MutableBytes>& destinations) const {
  size_t total = 0;
  for (const MutableBytes& into : destinations) total += into.size;
  if (total > static_cast<size_t>(kStreamChunkBytes)) return ReadStreamed(shards, destinations);
  const auto groups = ByPs(shards);
  std::map<int, rpc::ShardIds> requests = IdsByPs(groups, shards);
  std::map<int, rpc::ShardValues> replies;
  CallEachPs(*this, "a read", requests, replies,
             [](auto* async, auto* context, auto* request, auto* reply, auto done) {
               async->Read(context, request, reply, done);
             });
  for (const auto& [ps, indices] : groups) {
    const rpc::ShardValues& reply = replies.at(ps);
    for (size_t k = 0; k < indices.size(); ++k) {
      const MutableBytes& into = destinations[indices[k]];
      if (k >= static_cast<size_t>(reply.values_size()) ||
          reply.values(static_cast<int>(k)).data().size() != into.size) {
        throw Error(CHORUS_INTERNAL, TaskName(ps) +
                                         " returned a read that does not match the "
                                         "shards asked for");
      }
      if (into.size > 0) {
        std::memcpy(into.data, reply.values(static_cast<int>(k)).data().data(), into.size);
      }
    }
  }
}

void PsClient::UpdateFrom(rpc::UpdateRequest::Kind kind, chorus_dtype dtype,
                          const std::vector<ShardPlacement>& shards,
                          const std::vector<ConstBytes>& sources) const {
  size_t total = 0;
  for (const ConstBytes& from : sources) total += from.size;
  if (total > static_cast<size_t>(kStreamChunkBytes)) {
    return UpdateStreamed(kind, dtype, shards, sources);
  }
  const auto groups = ByPs(shards);
  std::map<int, rpc::UpdateRequest> requests;
  std::map<int, rpc::Empty> replies;
  for (const auto& [ps, indices] : groups) {
    rpc::UpdateRequest& request = requests[ps];
    request.set_kind(kind);
    for (size_t i : indices) {
      request.add_ids(shards[i].id);
      rpc::TensorData* value = request.add_values();
      value->set_dtype(static_cast<int32_t>(dtype));
      value->mutable_shape()->Assign(shards[i].shape.begin(), shards[i].shape.end());
      value->set_data(sources[i].data, sources[i].size);
    }
  }
  CallEachPs(
      *this, kind == rpc::UpdateRequest::APPLY_GRADIENT ? "an optimizer update" : "an assignment",
      requests, replies, [](auto* async, auto* context, auto* request, auto* reply, auto done) {
        async->Update(context, request, reply, done);
      });
}

std::vector<rpc::SlotState> PsClient::ReadSlots(const std::vector<ShardPlacement>& shards) const {
  const auto groups = ByPs(shards);
  std::map<int, rpc::ShardIds> requests = IdsByPs(groups, shards);
  std::map<int, rpc::SlotStates> replies;
  CallEachPs(*this, "reading optimizer slots", requests, replies,
             [](auto* async, auto* context, auto* request, auto* reply, auto done) {
               async->ReadSlots(context, request, reply, done);
             });
  std::vector<rpc::SlotState> states(shards.size());
  for (const auto& [ps, indices] : groups) {
    const rpc::SlotStates& reply = replies.at(ps);
    if (reply.shards_size() != static_cast<int>(indices.size())) {
      throw Error(CHORUS_INTERNAL, TaskName(ps) + " returned the slots of " +
                                       std::to_string(reply.shards_size()) + " shards for " +
                                       std::to_string(indices.size()));
    }
    for (size_t k = 0; k < indices.size(); ++k) {
      states[indices[k]] = reply.shards(static_cast<int>(k));
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
  }
  CallEachPs(*this, "writing optimizer slots", requests, replies,
             [](auto* async, auto* context, auto* request, auto* reply, auto done) {
               async->WriteSlots(context, request, reply, done);
             });
}

}  // namespace chorus::ps_internal
