// The parameter-server library's plumbing: the host device, deadlines, channels, gRPC statuses
// as chorus::Error, the tensor codec, the layout and row splitting.
#include <chorus/base/environment.h>
#include <chorus/rendezvous/job_credential.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "ps_internal.h"

namespace chorus::ps_internal {

Device HostDevice() {
  // Never destroyed, and Registry::Global() is not asked again: the coordinator's threads, gRPC's
  // and a worker's functions turn results into tensors here, also while exit() (a signal
  // handler's, or a plugin's) destroys the process's static objects, the registry among them.
  // Asking the destroyed registry crashed (SIGSEGV in Registry::DeviceEnumerators).
  static const Device* const host = new Device{Registry::Global().CpuDevices(), 0};
  return *host;
}

Milliseconds DefaultTimeout() {
  if (GetEnv("CHORUS_TIMEOUT_SECONDS")) {
    return Milliseconds(static_cast<int64_t>(DefaultTimeoutSeconds() * 1000.0));
  }
  return std::chrono::seconds(60);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  // Reconnect soon after a task comes back: the default backoff grows to two minutes. (Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the time a connection attempt may
  // last, and at 100 ms a loaded machine's, or ThreadSanitizer's, handshakes failed.)
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
}

void AllowLargeMessages(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  builder.SetMaxSendMessageSize(std::numeric_limits<int>::max());
}

void PrepareCall(grpc::ClientContext& context, Milliseconds timeout,
                 const JobCredential& credential) {
  PrepareCall(context, std::chrono::system_clock::now() + timeout, credential);
}

void PrepareCall(grpc::ClientContext& context, std::chrono::system_clock::time_point deadline,
                 const JobCredential& credential) {
  context.set_deadline(deadline);
  if (!credential.token.empty()) context.AddMetadata(kCredentialKey, credential.token);
}

bool IsTransportFailure(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::CANCELLED;
}

void ThrowRpcError(const grpc::Status& status, const std::string& who, const std::string& what) {
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    throw Error(CHORUS_TIMEOUT, who + " did not answer " + what + " within its deadline (" +
                                    status.error_message() +
                                    "); is it alive? raise CHORUS_TIMEOUT_SECONDS if it is slow");
  }
  if (IsTransportFailure(status)) {
    throw Error(CHORUS_PEER_LOST, who + " is unavailable (" + what + ": " + status.error_message() +
                                      "); it died or was never started");
  }
  chorus_status code = CHORUS_INTERNAL;
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) code = CHORUS_INVALID_ARGUMENT;
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) code = CHORUS_NOT_FOUND;
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) code = CHORUS_INVALID_ARGUMENT;
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) code = CHORUS_INVALID_ARGUMENT;
  throw Error(code, who + " refused " + what + ": " + status.error_message());
}

void AwaitTask(rpc::Task::Stub& stub, const std::string& who, const std::string& role,
               Milliseconds timeout, const JobCredential& credential) {
  grpc::ClientContext context;
  PrepareCall(context, timeout, credential);
  context.set_wait_for_ready(true);
  rpc::Empty request;
  rpc::PingReply reply;
  const grpc::Status status = stub.Ping(&context, request, &reply);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    throw Error(CHORUS_TIMEOUT, who + " did not answer within " + std::to_string(timeout.count()) +
                                    " ms; is it started (TF_CONFIG task type \"" + role +
                                    "\") and serving (ServeIfServerTask)? raise "
                                    "CHORUS_TIMEOUT_SECONDS if it starts slowly");
  }
  if (!status.ok()) ThrowRpcError(status, who, "a ping");
  if (!reply.task().starts_with(role + " ")) {
    throw Error(CHORUS_INVALID_ARGUMENT, who + " answers as '" + reply.task() + "', not as a " +
                                             role + "; check TF_CONFIG's \"" + role +
                                             "\" addresses");
  }
}

void ShutdownTasks(const std::vector<rpc::Task::Stub*>& tasks, const JobCredential& credential) {
  struct Call {
    grpc::ClientContext context;
    rpc::Empty request, reply;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mutex;
  std::condition_variable done;
  size_t pending = tasks.size();
  for (rpc::Task::Stub* stub : tasks) {
    Call& call = *calls.emplace_back(std::make_unique<Call>());
    PrepareCall(call.context, std::chrono::seconds(2), credential);
    stub->async()->Shutdown(&call.context, &call.request, &call.reply, [&](grpc::Status) {
      std::lock_guard lock(mutex);
      if (--pending == 0) done.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return pending == 0; });
}

std::string Seconds(std::chrono::duration<double> duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", duration.count());
  return text;
}

void ToProto(const Tensor& tensor, rpc::TensorData* out) {
  out->set_dtype(static_cast<int32_t>(tensor.dtype()));
  out->mutable_shape()->Assign(tensor.shape().begin(), tensor.shape().end());
  std::string* data = out->mutable_data();
  data->resize(tensor.bytes());
  if (tensor.bytes() > 0) tensor.CopyToHost(data->data());
}

Shape ShapeOf(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(dims.begin(), dims.end());
}

Tensor FromProto(const rpc::TensorData& data, const std::string& what) {
  const Shape shape = ShapeOf(data.shape());
  for (int64_t dim : shape) {
    if (dim < 0) throw Error(CHORUS_INVALID_ARGUMENT, what + ": negative dimension");
  }
  const auto dtype = static_cast<chorus_dtype>(data.dtype());
  if (data.dtype() < 0 || chorus_dtype_size(dtype) == 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, what + ": unknown dtype " + std::to_string(data.dtype()));
  }
  Tensor tensor(HostDevice(), dtype, shape);
  if (data.data().size() != tensor.bytes()) {
    throw Error(CHORUS_INVALID_ARGUMENT, what + ": " + std::to_string(data.data().size()) +
                                             " bytes for a " + ShapeString(shape) + " tensor of " +
                                             std::to_string(tensor.bytes()));
  }
  if (tensor.bytes() > 0) tensor.CopyFromHost(data.data().data());
  return tensor;
}

void Layout::ToProto(rpc::Layout* out) const {
  out->set_version(version);
  for (const auto& info : variables) {
    rpc::VariableInfo* v = out->add_variables();
    v->set_name(info->name);
    v->set_dtype(static_cast<int32_t>(info->dtype));
    v->mutable_shape()->Assign(info->shape.begin(), info->shape.end());
    v->set_trainable(info->trainable);
    for (const ShardPlacement& shard : info->shards) {
      rpc::ShardInfo* s = v->add_shards();
      s->set_id(shard.id);
      s->set_ps(shard.ps);
      s->set_first_row(shard.first_row);
      s->mutable_shape()->Assign(shard.shape.begin(), shard.shape.end());
    }
  }
}

std::shared_ptr<const Layout> Layout::FromProto(const rpc::Layout& proto) {
  auto layout = std::make_shared<Layout>();
  layout->version = proto.version();
  for (const rpc::VariableInfo& v : proto.variables()) {
    auto info = std::make_shared<VariableInfo>();
    info->name = v.name();
    info->dtype = static_cast<chorus_dtype>(v.dtype());
    info->shape = ShapeOf(v.shape());
    info->trainable = v.trainable();
    for (const rpc::ShardInfo& s : v.shards()) {
      info->shards.push_back({s.id(), s.ps(), s.first_row(), ShapeOf(s.shape())});
    }
    layout->variables.push_back(std::move(info));
  }
  return layout;
}

std::shared_ptr<const VariableInfo> Layout::Find(const std::string& name) const {
  for (const auto& info : variables) {
    if (info->name == name) return info;
  }
  return nullptr;
}

namespace {

size_t RowBytes(const Shape& shape, chorus_dtype dtype) {
  size_t bytes = chorus_dtype_size(dtype);
  for (size_t i = 1; i < shape.size(); ++i) bytes *= static_cast<size_t>(shape[i]);
  return bytes;
}

}  // namespace

std::vector<MutableBytes> ShardSpans(const VariableInfo& info, void* whole) {
  const size_t row_bytes = RowBytes(info.shape, info.dtype);
  std::vector<MutableBytes> spans;
  for (const ShardPlacement& shard : info.shards) {
    spans.push_back(
        {static_cast<uint8_t*>(whole) + static_cast<size_t>(shard.first_row) * row_bytes,
         static_cast<size_t>(NumElements(shard.shape)) * chorus_dtype_size(info.dtype)});
  }
  return spans;
}

std::vector<ConstBytes> ShardSpans(const VariableInfo& info, const void* whole) {
  std::vector<ConstBytes> spans;
  for (const MutableBytes& span : ShardSpans(info, const_cast<void*>(whole))) {
    spans.push_back({span.data, span.size});
  }
  return spans;
}

std::vector<Tensor> SplitRows(const Tensor& whole, const std::vector<ShardPlacement>& shards) {
  if (shards.size() == 1) return {whole};
  std::vector<uint8_t> bytes(whole.bytes());
  if (!bytes.empty()) whole.CopyToHost(bytes.data());
  const size_t row_bytes = RowBytes(whole.shape(), whole.dtype());
  std::vector<Tensor> parts;
  for (const ShardPlacement& shard : shards) {
    Tensor part(HostDevice(), whole.dtype(), shard.shape);
    if (part.bytes() > 0) {
      part.CopyFromHost(bytes.data() + static_cast<size_t>(shard.first_row) * row_bytes);
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

Tensor ConcatRows(const VariableInfo& info, const std::vector<Tensor>& parts) {
  if (parts.size() == 1) return parts.front();
  Tensor whole(HostDevice(), info.dtype, info.shape);
  std::vector<uint8_t> bytes(whole.bytes());
  const size_t row_bytes = RowBytes(info.shape, info.dtype);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].bytes() > 0) {
      parts[i].CopyToHost(bytes.data() + static_cast<size_t>(info.shards[i].first_row) * row_bytes);
    }
  }
  if (!bytes.empty()) whole.CopyFromHost(bytes.data());
  return whole;
}

std::vector<std::string> JobAddresses(const ClusterResolver& resolver, const std::string& job) {
  const auto it = resolver.cluster_spec().find(job);
  return it == resolver.cluster_spec().end() ? std::vector<std::string>{} : it->second;
}

void ClosureState::Finish(std::vector<Tensor> results, int by_worker) {
  std::lock_guard lock(mutex);
  if (finished) return;
  outputs = std::move(results);
  worker = by_worker;
  finished = true;
  ready.notify_all();
}

void ClosureState::Fail(const Error& failure, int by_worker) {
  std::lock_guard lock(mutex);
  if (finished) return;
  error.emplace(failure);
  worker = by_worker;
  finished = true;
  ready.notify_all();
}

}  // namespace chorus::ps_internal
