// The worker and ps tasks' server (the gRPC service Task), the registries of functions and
// dataset functions, and ServeIfServerTask.
#include <chorus/parameter_server/functions.h>
#include <chorus/rendezvous/job_credential.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <random>

#include "ps_internal.h"
#include "variable_store.h"

namespace chorus {
namespace {

using ps_internal::FromProto;
using ps_internal::Layout;
using ps_internal::PsClient;
using ps_internal::PsUnavailable;
using ps_internal::RunDeadlineExceeded;

// A worker gives up on a ps this long (at most a quarter of the run's time) before the
// coordinator's deadline for the run, so that its reply, naming the ps, arrives before the
// coordinator gives up on the worker.
constexpr auto kReplyMargin = std::chrono::milliseconds(500);
using ps_internal::ToProto;

struct Registries {
  std::mutex mutex;
  std::map<std::string, RemoteFunction> functions;
  std::map<std::string, DatasetFunction> datasets;
};

Registries& GlobalRegistries() {
  static Registries* registries = new Registries;  // never destroyed: used from static init
  return *registries;
}

std::string KnownNames(const auto& map) {
  std::string names;
  for (const auto& [name, unused] : map) names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "none" : names;
}

// A gRPC status carrying a chorus::Error's message.
grpc::Status StatusOf(const Error& e) {
  const grpc::StatusCode code = e.status() == CHORUS_NOT_FOUND ? grpc::StatusCode::NOT_FOUND
                                : e.status() == CHORUS_INVALID_ARGUMENT
                                    ? grpc::StatusCode::INVALID_ARGUMENT
                                    : grpc::StatusCode::INTERNAL;
  return grpc::Status(code, e.what());
}

template <typename Body>
grpc::Status Guarded(Body&& body) {
  try {
    body();
    return grpc::Status::OK;
  } catch (const Error& e) {
    return StatusOf(e);
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
}

// A per-worker dataset's position on this worker.
struct WorkerIterator {
  std::mutex mutex;
  Dataset dataset;
  int64_t next = 0;
};

class WorkerFunctionContext : public FunctionContext {
 public:
  WorkerFunctionContext(std::shared_ptr<const Layout> layout, std::shared_ptr<PsClient> client,
                        std::shared_ptr<WorkerIterator> iterator, int worker, int workers)
      : layout_(std::move(layout)),
        client_(std::move(client)),
        iterator_(std::move(iterator)),
        worker_(worker),
        workers_(workers) {}

  ShardedVariable variable(const std::string& name) const override {
    auto info = layout_->Find(name);
    if (info == nullptr) {
      std::string known;
      for (const auto& v : layout_->variables) known += (known.empty() ? "" : ", ") + v->name;
      throw Error(CHORUS_NOT_FOUND, "no variable '" + name + "' was created by the coordinator " +
                                        "(it has: " + (known.empty() ? "none" : known) + ")");
    }
    return ShardedVariable(info, client_);
  }

  HostBatch next_batch() override {
    if (iterator_ == nullptr) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "next_batch(): this function was scheduled without a per-worker iterator; "
                  "schedule it with create_per_worker_dataset(...).iterator()");
    }
    std::lock_guard lock(iterator_->mutex);
    if (iterator_->dataset.num_batches() == 0) {
      throw Error(CHORUS_INVALID_ARGUMENT, "next_batch(): this worker's dataset is empty");
    }
    if (iterator_->next >= iterator_->dataset.num_batches()) iterator_->next = 0;
    return iterator_->dataset.GetBatch(iterator_->next++);
  }

  int worker_index() const override { return worker_; }
  int num_workers() const override { return workers_; }

 private:
  std::shared_ptr<const Layout> layout_;
  std::shared_ptr<PsClient> client_;
  std::shared_ptr<WorkerIterator> iterator_;
  int worker_, workers_;
};

class TaskService final : public ps_internal::rpc::Task::Service {
 public:
  TaskService(const ClusterResolver& resolver)
      : role_(resolver.task_type()),
        task_(resolver.task_type() + " " + std::to_string(resolver.task_id())),
        task_id_(resolver.task_id()),
        num_workers_(static_cast<int>(ps_internal::JobAddresses(resolver, "worker").size())),
        incarnation_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)),
        credential_(JobCredentialFor(ps_internal::kCredentialPurpose,
                                     task_ + "'s parameter-server server")) {
    if (role_ == "worker") {
      client_ = std::make_shared<PsClient>(ps_internal::JobAddresses(resolver, "ps"),
                                           ps_internal::DefaultTimeout());
    }
  }

  bool WaitForShutdown(std::chrono::milliseconds period) {
    std::unique_lock lock(mutex_);
    return shutdown_cv_.wait_for(lock, period, [this] { return shutdown_; });
  }

  grpc::Status Ping(grpc::ServerContext* context, const ps_internal::rpc::Empty*,
                    ps_internal::rpc::PingReply* reply) override {
    if (auto denied = Deny(context)) return *denied;
    reply->set_task(task_);
    reply->set_incarnation(incarnation_);
    return grpc::Status::OK;
  }

  grpc::Status Shutdown(grpc::ServerContext* context, const ps_internal::rpc::Empty*,
                        ps_internal::rpc::Empty*) override {
    if (auto denied = Deny(context)) return *denied;
    std::lock_guard lock(mutex_);
    shutdown_ = true;
    shutdown_cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status SetOptimizer(grpc::ServerContext* context,
                            const ps_internal::rpc::SetOptimizerRequest* r,
                            ps_internal::rpc::Empty*) override {
    if (auto refused = Refuse(context, "ps", "SetOptimizer")) return *refused;
    return Guarded([&] { store_.SetOptimizer(r->optimizer()); });
  }

  grpc::Status CreateShards(grpc::ServerContext* context,
                            const ps_internal::rpc::CreateShardsRequest* r,
                            ps_internal::rpc::Empty*) override {
    if (auto refused = Refuse(context, "ps", "CreateShards")) return *refused;
    return Guarded([&] {
      for (int i = 0; i < r->ids_size(); ++i) store_.Create(r->ids(i), r->names(i), r->initial(i));
    });
  }

  grpc::Status Read(grpc::ServerContext* context, const ps_internal::rpc::ShardIds* r,
                    ps_internal::rpc::ShardValues* reply) override {
    if (auto refused = Refuse(context, "ps", "Read")) return *refused;
    return Guarded([&] {
      for (uint64_t id : r->ids()) store_.Read(id, reply->add_values());
    });
  }

  grpc::Status Update(grpc::ServerContext* context, const ps_internal::rpc::UpdateRequest* r,
                      ps_internal::rpc::Empty*) override {
    if (auto refused = Refuse(context, "ps", "Update")) return *refused;
    return Guarded([&] {
      for (int i = 0; i < r->ids_size(); ++i) {
        ps_internal::rpc::TensorData value = r->values(i);
        store_.Update(r->kind(), r->ids(i), value);
      }
    });
  }

  grpc::Status ReadStream(grpc::ServerContext* context, const ps_internal::rpc::ShardIds* r,
                          grpc::ServerWriter<ps_internal::rpc::ShardChunk>* writer) override {
    if (auto refused = Refuse(context, "ps", "ReadStream")) return *refused;
    return Guarded([&] {
      ps_internal::rpc::TensorData value;
      ps_internal::rpc::ShardChunk chunk;
      for (uint64_t id : r->ids()) {
        // The value as it is now; writes meanwhile go to another buffer.
        const std::shared_ptr<const std::string> bytes = store_.Snapshot(id, &value);
        const int64_t total = static_cast<int64_t>(bytes->size());
        int64_t offset = 0;
        do {
          chunk.Clear();
          chunk.set_id(id);
          chunk.set_offset(offset);
          if (offset == 0) {
            chunk.set_total_bytes(total);
            chunk.set_dtype(value.dtype());
            *chunk.mutable_shape() = value.shape();
          }
          const int64_t size = std::min(ps_internal::kStreamChunkBytes, total - offset);
          chunk.set_data(bytes->data() + offset, static_cast<size_t>(size));
          if (!writer->Write(chunk)) throw Error(CHORUS_PEER_LOST, "the reader went away");
          offset += size;
        } while (offset < total);
      }
    });
  }

  grpc::Status UpdateStream(grpc::ServerContext* context,
                            grpc::ServerReader<ps_internal::rpc::ShardChunk>* reader,
                            ps_internal::rpc::Empty*) override {
    if (auto refused = Refuse(context, "ps", "UpdateStream")) return *refused;
    return Guarded([&] {
      // Each shard's value is gathered whole, then applied under its lock like Update's.
      struct Pending {
        uint64_t id;
        ps_internal::rpc::UpdateRequest::Kind kind;
        ps_internal::rpc::TensorData value;
        int64_t total;
      };
      std::vector<Pending> pending;
      ps_internal::rpc::ShardChunk chunk;
      while (reader->Read(&chunk)) {
        if (chunk.offset() == 0) {
          Pending next{chunk.id(), chunk.kind(), {}, chunk.total_bytes()};
          next.value.set_dtype(chunk.dtype());
          *next.value.mutable_shape() = chunk.shape();
          *next.value.mutable_data() = TakeSpare(static_cast<size_t>(chunk.total_bytes()));
          pending.push_back(std::move(next));
        }
        if (pending.empty() || pending.back().id != chunk.id() ||
            static_cast<int64_t>(pending.back().value.data().size()) != chunk.offset()) {
          throw Error(CHORUS_INVALID_ARGUMENT, "UpdateStream: chunks out of order");
        }
        pending.back().value.mutable_data()->append(chunk.data());
      }
      for (Pending& update : pending) {
        if (static_cast<int64_t>(update.value.data().size()) != update.total) {
          throw Error(CHORUS_INVALID_ARGUMENT, "UpdateStream: a shard's value arrived short");
        }
        if (auto replaced = store_.Update(update.kind, update.id, update.value)) {
          KeepSpare(std::move(*replaced));
        }
      }
    });
  }

  grpc::Status ReadSlots(grpc::ServerContext* context, const ps_internal::rpc::ShardIds* r,
                         ps_internal::rpc::SlotStates* reply) override {
    if (auto refused = Refuse(context, "ps", "ReadSlots")) return *refused;
    return Guarded([&] {
      for (uint64_t id : r->ids()) store_.ReadSlots(id, reply->add_shards());
    });
  }

  grpc::Status WriteSlots(grpc::ServerContext* context, const ps_internal::rpc::SlotStates* r,
                          ps_internal::rpc::Empty*) override {
    if (auto refused = Refuse(context, "ps", "WriteSlots")) return *refused;
    return Guarded([&] {
      for (const auto& state : r->shards()) store_.WriteSlots(state);
    });
  }

  grpc::Status Run(grpc::ServerContext* context, const ps_internal::rpc::RunRequest* request,
                   ps_internal::rpc::RunReply* reply) override {
    if (auto refused = Refuse(context, "worker", "Run")) return *refused;
    reply->set_worker(task_);
    std::shared_ptr<const Layout> layout = LayoutFor(*request);
    if (layout == nullptr) {
      reply->set_outcome(ps_internal::rpc::RunReply::NEED_LAYOUT);
      return grpc::Status::OK;
    }
    try {
      RemoteFunction function;
      {
        Registries& registries = GlobalRegistries();
        std::lock_guard lock(registries.mutex);
        const auto it = registries.functions.find(request->function());
        if (it == registries.functions.end()) {
          throw Error(CHORUS_NOT_FOUND,
                      "function '" + request->function() + "' is not registered in " + task_ +
                          "'s program (it has: " + KnownNames(registries.functions) +
                          "); register it with RegisterFunction in every role");
        }
        function = it->second;
      }
      std::vector<Tensor> args;
      for (const auto& arg : request->args()) args.push_back(FromProto(arg, "an argument"));
      WorkerFunctionContext function_context(layout, ClientForRun(*context, *request),
                                             IteratorFor(request->iterator()), task_id_,
                                             num_workers_);
      const std::vector<Tensor> outputs = function(function_context, args);
      for (const Tensor& output : outputs) ToProto(output, reply->add_outputs());
      reply->set_outcome(ps_internal::rpc::RunReply::OK);
    } catch (const PsUnavailable& e) {
      reply->Clear();
      reply->set_worker(task_);
      reply->set_outcome(ps_internal::rpc::RunReply::PS_UNAVAILABLE);
      reply->set_failed_ps(e.ps());
      reply->set_status(static_cast<int32_t>(e.status()));
      reply->set_error(e.what());
    } catch (const RunDeadlineExceeded& e) {
      reply->Clear();
      reply->set_worker(task_);
      reply->set_outcome(ps_internal::rpc::RunReply::DEADLINE_EXCEEDED);
      reply->set_error(e.what());
    } catch (const std::exception& e) {
      reply->Clear();
      reply->set_worker(task_);
      reply->set_outcome(ps_internal::rpc::RunReply::FUNCTION_ERROR);
      reply->set_error(e.what());
    }
    return grpc::Status::OK;
  }

  grpc::Status StreamIn(grpc::ServerContext* context,
                        grpc::ServerReader<ps_internal::rpc::Chunk>* reader,
                        ps_internal::rpc::Empty*) override {
    if (auto denied = Deny(context)) return *denied;
    ps_internal::rpc::Chunk chunk;
    while (reader->Read(&chunk)) {
    }
    return grpc::Status::OK;
  }

  grpc::Status StreamOut(grpc::ServerContext* context,
                         const ps_internal::rpc::StreamOutRequest* request,
                         grpc::ServerWriter<ps_internal::rpc::Chunk>* writer) override {
    if (auto denied = Deny(context)) return *denied;
    const int64_t chunk_bytes = std::max<int64_t>(1, request->chunk_bytes());
    ps_internal::rpc::Chunk chunk;
    for (int64_t sent = 0; sent < request->bytes(); sent += chunk_bytes) {
      chunk.mutable_data()->assign(
          static_cast<size_t>(std::min(chunk_bytes, request->bytes() - sent)), 'x');
      if (!writer->Write(chunk)) break;
    }
    return grpc::Status::OK;
  }

 private:
  // A caller without the job's credential, or a method of another role, is refused.
  std::optional<grpc::Status> Refuse(grpc::ServerContext* context, const std::string& role,
                                     const char* method) const {
    if (auto denied = Deny(context)) return denied;
    if (role_ == role) return std::nullopt;
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        task_ + " is not a " + role + " task and does not serve " + method +
                            "; check TF_CONFIG's addresses");
  }

  // Large assignments reuse the buffers they replace: a new 64 MiB buffer costs more in page
  // faults than receiving its bytes. At most kSpares are kept.
  static constexpr size_t kSpares = 2;

  std::string TakeSpare(size_t bytes) {
    std::string buffer;
    {
      std::lock_guard lock(mutex_);
      for (auto it = spares_.begin(); it != spares_.end(); ++it) {
        if (it->capacity() >= bytes) {
          buffer = std::move(*it);
          spares_.erase(it);
          break;
        }
      }
    }
    buffer.clear();
    buffer.reserve(bytes);
    return buffer;
  }

  void KeepSpare(std::string buffer) {
    if (buffer.capacity() < static_cast<size_t>(ps_internal::kStreamChunkBytes)) return;
    std::lock_guard lock(mutex_);
    spares_.push_back(std::move(buffer));
    if (spares_.size() > kSpares) spares_.erase(spares_.begin());
  }

  std::optional<grpc::Status> Deny(grpc::ServerContext* context) const {
    if (!credential_.required) return std::nullopt;
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find(ps_internal::kCredentialKey);
    const bool presented = it != metadata.end();
    if (presented &&
        AcceptsJobCredential(credential_, std::string_view(it->second.data(), it->second.size()))) {
      return std::nullopt;
    }
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        task_ + " admits only holders of the job's secret (" + credential_.source +
                            "), and the caller presented " + (presented ? "a wrong" : "no") +
                            " credential; " + JobSecretHint());
  }

  // The ps client of one run: the coordinator's deadline for each ps call, cut short before the
  // run's own deadline.
  std::shared_ptr<PsClient> ClientForRun(const grpc::ServerContext& context,
                                         const ps_internal::rpc::RunRequest& request) const {
    const ps_internal::Milliseconds timeout =
        request.ps_timeout_ms() > 0 ? ps_internal::Milliseconds(request.ps_timeout_ms())
                                    : client_->timeout();
    using Duration = std::chrono::system_clock::duration;
    const auto run_deadline = context.deadline();
    const Duration left = run_deadline - std::chrono::system_clock::now();
    return client_->ForRun(
        timeout, run_deadline - std::clamp<Duration>(left / 4, Duration::zero(), kReplyMargin));
  }

  std::shared_ptr<const Layout> LayoutFor(const ps_internal::rpc::RunRequest& request) {
    std::lock_guard lock(mutex_);
    if (request.has_layout()) {
      auto layout = Layout::FromProto(request.layout());
      layout_ = layout;  // the coordinator's latest (one coordinator at a time)
      return layout;
    }
    if (layout_ != nullptr && layout_->version == request.layout_version()) return layout_;
    return nullptr;
  }

  std::shared_ptr<WorkerIterator> IteratorFor(const ps_internal::rpc::IteratorRef& ref) {
    if (ref.id() == 0) return nullptr;
    std::lock_guard lock(mutex_);
    auto& iterator = iterators_[ref.id()];
    if (iterator != nullptr) return iterator;
    DatasetFunction dataset_function;
    {
      Registries& registries = GlobalRegistries();
      std::lock_guard registry_lock(registries.mutex);
      const auto it = registries.datasets.find(ref.dataset_function());
      if (it == registries.datasets.end()) {
        iterators_.erase(ref.id());
        throw Error(CHORUS_NOT_FOUND, "dataset function '" + ref.dataset_function() +
                                          "' is not registered in " + task_ +
                                          "'s program (it has: " + KnownNames(registries.datasets) +
                                          "); register it with RegisterDatasetFunction");
      }
      dataset_function = it->second;
    }
    auto created = std::make_shared<WorkerIterator>();
    created->dataset = dataset_function(InputContext(num_workers_, task_id_, 1));
    iterator = created;
    return created;
  }

  const std::string role_;
  const std::string task_;
  const int task_id_;
  const int num_workers_;
  const uint64_t incarnation_;
  const JobCredential credential_;
  std::shared_ptr<PsClient> client_;
  ps_internal::VariableStore store_;
  std::mutex mutex_;
  std::condition_variable shutdown_cv_;
  bool shutdown_ = false;
  std::shared_ptr<const Layout> layout_;
  std::map<uint64_t, std::shared_ptr<WorkerIterator>> iterators_;
  std::vector<std::string> spares_;
};

}  // namespace

void RegisterFunction(const std::string& name, RemoteFunction function) {
  Registries& registries = GlobalRegistries();
  std::lock_guard lock(registries.mutex);
  if (!registries.functions.emplace(name, std::move(function)).second) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "RegisterFunction: '" + name + "' is registered already; give each a new name");
  }
}

void RegisterDatasetFunction(const std::string& name, DatasetFunction function) {
  Registries& registries = GlobalRegistries();
  std::lock_guard lock(registries.mutex);
  if (!registries.datasets.emplace(name, std::move(function)).second) {
    throw Error(CHORUS_INVALID_ARGUMENT, "RegisterDatasetFunction: '" + name +
                                             "' is registered already; give each a new name");
  }
}

bool ServeIfServerTask(const ClusterResolver* resolver) {
  std::unique_ptr<ClusterResolver> from_environment;
  if (resolver == nullptr) {
    from_environment = ResolveClusterFromEnvironment();
    resolver = from_environment.get();
  }
  if (resolver == nullptr) return false;
  const std::string& role = resolver->task_type();
  // A job without ps tasks is not a parameter-server job (MultiWorkerMirroredStrategy's workers).
  if (ps_internal::JobAddresses(*resolver, "ps").empty()) return false;
  if (role != "worker" && role != "ps") return false;
  const std::string task = role + " " + std::to_string(resolver->task_id());
  const std::string address =
      ps_internal::JobAddresses(*resolver, role).at(static_cast<size_t>(resolver->task_id()));

  TaskService service(*resolver);
  grpc::ServerBuilder builder;
  ps_internal::AllowLargeMessages(builder);
  int bound_port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  // One task name, one process: gRPC sets SO_REUSEPORT by default, and then a second process
  // started as the same task binds the same port and takes a share of the calls.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    const std::string port = address.substr(address.rfind(':') + 1);
    throw Error(CHORUS_UNAVAILABLE,
                task + " cannot serve at " + address + " (TF_CONFIG's address for it): port " +
                    port + " is taken, by another process started as " + task +
                    " or by another program, or the host is not this machine's. One task "
                    "name is one process: stop the other one, or give " +
                    task + " a free port in TF_CONFIG");
  }
  std::fprintf(stderr, "chorus: %s serving at %s\n", task.c_str(), address.c_str());
  while (!service.WaitForShutdown(std::chrono::seconds(1))) {
  }
  std::fprintf(stderr, "chorus: %s: the coordinator ended the job; stopping\n", task.c_str());
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return true;
}

}  // namespace chorus
