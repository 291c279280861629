#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>

#include <cmath>
#include <cstring>

#include "base/host_kernels.h"
#include "base/logging.h"

namespace chorus {
namespace {

// Operation codes in a signature (not the ABI's enum: also covers the signature's own checks).
enum SignatureOp : int64_t { kAllReduce = 1, kBroadcast, kAllGather, kReduceScatter, kBarrier };

const char* OpName(int64_t op) {
  switch (op) {
    case kAllReduce:
      return "all_reduce";
    case kBroadcast:
      return "broadcast";
    case kAllGather:
      return "all_gather";
    case kReduceScatter:
      return "reduce_scatter";
    case kBarrier:
      return "barrier";
  }
  return "an unknown operation";
}

// One rank's view of an operation: what every rank must agree on.
struct Signature {
  int64_t sequence, op, count, dtype, reduce, root;
};

std::string Describe(const Signature& s) {
  std::string text =
      std::string(OpName(s.op)) + " of " + std::to_string(s.count) + " " +
      (s.dtype >= 0 && s.dtype < CHORUS_DTYPE_COUNT ? DtypeName(static_cast<chorus_dtype>(s.dtype))
                                                    : "?");
  if (s.op == kAllReduce || s.op == kReduceScatter) {
    text += std::string(" (") +
            (s.reduce >= 0 && s.reduce < CHORUS_REDUCE_OP_COUNT
                 ? ReduceOpName(static_cast<chorus_reduce_op>(s.reduce))
                 : "?") +
            ")";
  }
  if (s.op == kBroadcast) text += " from rank " + std::to_string(s.root);
  return text;
}

std::vector<chorus_option> RawOptions(const Options& options) {
  std::vector<chorus_option> raw;
  for (const auto& [key, value] : options) raw.push_back({key.c_str(), value.c_str()});
  return raw;
}

int64_t TimeoutMs(double seconds) { return static_cast<int64_t>(std::ceil(seconds * 1000)); }

bool ChecksFromEnvironment() {
  const auto value = GetEnv("CHORUS_CHECK_COLLECTIVES");
  return !value || *value != "0";
}

}  // namespace

std::vector<std::string> CollectiveNames(const Registry& registry) {
  std::vector<std::string> names;
  for (const auto& plugin : registry.plugins()) {
    if (auto* api = plugin->collective()) names.push_back(api->name);
  }
  return names;
}

namespace {

std::shared_ptr<PluginLibrary> FindCollective(const Registry& registry, const std::string& name) {
  for (const auto& plugin : registry.plugins()) {
    auto* api = plugin->collective();
    if (api != nullptr && (name == api->name || name == plugin->name())) return plugin;
  }
  std::string available;
  for (const auto& n : CollectiveNames(registry)) available += (available.empty() ? "" : ", ") + n;
  std::string message =
      "no loaded plugin provides a collective called '" + name + "'. Available: " + available + ".";
  for (const auto& rejection : registry.rejected()) {
    if (rejection.path.find("libchorus-" + name + ".so") != std::string::npos) {
      message += " " + rejection.path + " was rejected: " + rejection.reason;
    }
  }
  throw Error(CHORUS_INVALID_ARGUMENT, message);
}

// "shm+gloo": the hierarchical collective with local=shm, cross=gloo. Empty parts for a flat
// name.
std::pair<std::string, std::string> SplitComposite(const std::string& name) {
  const auto plus = name.find('+');
  if (plus == std::string::npos) return {};
  return {name.substr(0, plus), name.substr(plus + 1)};
}

}  // namespace

std::string CanonicalCollectiveName(const Registry& registry, const std::string& name) {
  const auto [local, cross] = SplitComposite(name);
  if (local.empty() && cross.empty()) return FindCollective(registry, name)->collective()->name;
  if (local.empty() || cross.empty() || cross.find('+') != std::string::npos) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "'" + name +
                    "' is not a hierarchical collective's name: it takes the form "
                    "local+cross with two collectives, e.g. shm+gloo");
  }
  FindCollective(registry, "hierarchical");
  return CanonicalCollectiveName(registry, local) + "+" + CanonicalCollectiveName(registry, cross);
}

Options AddressOptionsFor(const std::string& collective, const std::string& host) {
  const auto [local, cross] = SplitComposite(collective);
  if (local.empty() && cross.empty()) {
    if (collective == "gloo") return {{"hostname", host}};
    if (collective == kCoreRing || collective == "ring_grpc") return {{"host", host}};
    return {};
  }
  Options options;
  for (const auto& [key, value] : AddressOptionsFor(local, host)) {
    options.emplace_back("local." + key, value);
  }
  for (const auto& [key, value] : AddressOptionsFor(cross, host)) {
    options.emplace_back("cross." + key, value);
  }
  return options;
}

std::unique_ptr<Communicator> Communicator::Create(const Registry& registry,
                                                   const std::string& name,
                                                   const CommunicatorConfig& config) {
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size) {
    throw Error(CHORUS_INVALID_ARGUMENT, "communicator: rank " + std::to_string(config.rank) +
                                             " of size " + std::to_string(config.size) +
                                             " is not a valid rank (0 <= rank < size)");
  }
  if (!config.store) throw Error(CHORUS_INVALID_ARGUMENT, "communicator: no rendezvous store");
  if (!config.task_names.empty() && config.task_names.size() != static_cast<size_t>(config.size)) {
    throw Error(CHORUS_INVALID_ARGUMENT, "communicator: task_names must have one name per rank");
  }
  std::unique_ptr<Communicator> self(new Communicator());
  self->config_ = config;
  self->config_.check_signatures = config.check_signatures && ChecksFromEnvironment();
  self->backends_.reserve(1 + config.routes.size());
  self->AddBackend(registry, name, config.options);
  // Every rank creates the routed collectives in the order the rules name them, so their
  // rendezvous happen in the same order everywhere.
  for (const AlgorithmRule& rule : config.routes) {
    const std::string routed = CanonicalCollectiveName(registry, rule.collective);
    size_t index = 0;
    while (index < self->backends_.size() && self->backends_[index].name != routed) ++index;
    if (index == self->backends_.size()) {
      self->AddBackend(registry, routed,
                       config.options_for ? config.options_for(routed) : Options{});
    }
    self->routes_.emplace_back(rule, index);
  }
  if (!config.routes.empty()) {
    Log().info("communicator '{}': {} by default, routed by {}", config.name,
               self->backends_[0].name, DescribeRules(config.routes));
  }
  return self;
}

void Communicator::AddBackend(const Registry& registry, const std::string& name,
                              const Options& options) {
  Backend backend;
  backend.name = CanonicalCollectiveName(registry, name);
  const auto [local, cross] = SplitComposite(backend.name);
  backend.library = FindCollective(registry, local.empty() ? name : "hierarchical");
  backend.api = backend.library->collective();
  Options all = options;
  if (!local.empty()) {
    all.insert(all.begin(), {{"local", local}, {"cross", cross}});
  }
  if (!backend.api->create || !backend.api->destroy || !backend.api->all_reduce) {
    throw Error(CHORUS_UNSUPPORTED,
                "collective '" + backend.name + "' lacks create, destroy or all_reduce");
  }
  backend.store = std::make_unique<CKvStore>(
      WithPrefix(config_.store, "comm/" + config_.name + "/" + backend.name + "/"));
  const auto raw = RawOptions(all);
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = config_.rank;
  args.size = config_.size;
  args.store = backend.store->get();
  args.timeout_ms = TimeoutMs(config_.timeout_seconds);
  args.options = raw.data();
  args.num_options = raw.size();
  const chorus_status status = backend.api->create(&args, &backend.handle);
  if (status != CHORUS_OK) {
    throw Error(status, "collective '" + backend.name + "' (plugin " + backend.library->name() +
                            ") could not create the communicator of " + TaskName(config_.rank) +
                            " (rank " + std::to_string(config_.rank) + " of " +
                            std::to_string(config_.size) + "): " + backend.library->LastError());
  }
  Log().debug("communicator '{}' over {}: rank {} of {}", config_.name, backend.name, config_.rank,
              config_.size);
  backends_.push_back(std::move(backend));
}

Communicator::~Communicator() {
  for (auto it = backends_.rbegin(); it != backends_.rend(); ++it) {
    if (it->handle != nullptr) it->api->destroy(it->handle);
  }
}

const Communicator::Backend& Communicator::Route(chorus_collective_op op, uint64_t bytes) const {
  for (const auto& [rule, index] : routes_) {
    if (rule.op == op && bytes >= rule.min_bytes && bytes < rule.max_bytes) {
      return backends_[index];
    }
  }
  return backends_[0];
}

const std::string& Communicator::BackendFor(chorus_collective_op op, uint64_t bytes) const {
  return Route(op, bytes).name;
}

std::string Communicator::TaskName(int rank) const {
  if (rank >= 0 && static_cast<size_t>(rank) < config_.task_names.size()) {
    return config_.task_names[static_cast<size_t>(rank)];
  }
  return "rank " + std::to_string(rank);
}

void Communicator::Abort(chorus_status status, const std::string& reason) {
  bool expected = false;
  if (!abort_claimed_.compare_exchange_strong(expected, true)) return;
  abort_reason_ = reason;
  abort_status_.store(status);
  aborted_.store(true);
  Log().error("communicator over {}: {}", backend(), reason);
  for (const Backend& b : backends_) {
    if (b.api->abort != nullptr && b.handle != nullptr) b.api->abort(b.handle);
  }
}

void Communicator::Fail(const Backend& backend, chorus_status status, const std::string& what,
                        const std::string& detail) {
  if (aborted_.load()) {
    throw Error(abort_status_.load(), what + " over " + backend.name + " failed: " + abort_reason_);
  }
  std::string hint;
  if (status == CHORUS_TIMEOUT) {
    hint = " (timeout " + std::to_string(config_.timeout_seconds) +
           " s: CommunicationOptions.timeout_seconds or CHORUS_TIMEOUT_SECONDS)";
  } else if (status == CHORUS_PEER_LOST) {
    std::string lost;
    if (config_.lost_peers) {
      try {
        lost = config_.lost_peers();
      } catch (const std::exception& e) {
        Log().debug("communicator: could not learn which worker was lost: {}", e.what());
      }
    }
    hint = lost.empty()
               ? " (a worker's process ended; the job cannot continue without it)"
               : " (lost " + lost + ": its process ended; the job cannot continue without it)";
  }
  throw Error(status, what + " over " + backend.name + " on " + TaskName(config_.rank) +
                          " failed with " + StatusName(status) + ": " + detail + hint);
}

void Communicator::Finish(const Backend& backend, chorus_status status, chorus_request* request,
                          const char* what) {
  const chorus_plugin& table = backend.library->table();
  if (status == CHORUS_OK && request != nullptr) {
    status = table.request_wait(request, TimeoutMs(config_.timeout_seconds));
    if (status == CHORUS_TIMEOUT) {
      // The operation may still write into the caller's buffers: abort the communicator before
      // giving the buffers back, and leak the request rather than free it under a live operation.
      if (backend.api->abort != nullptr) backend.api->abort(backend.handle);
      Fail(backend, CHORUS_TIMEOUT, what, "the operation did not finish in time");
    }
    const std::string message = status == CHORUS_OK ? "" : backend.library->LastError();
    table.request_free(request);
    if (status != CHORUS_OK) Fail(backend, status, what, message);
    return;
  }
  if (status != CHORUS_OK) Fail(backend, status, what, backend.library->LastError());
}

void Communicator::CheckSignature(int op, size_t count, chorus_dtype dtype, chorus_reduce_op reduce,
                                  int root) {
  const Backend& own = backends_[0];
  if (aborted_.load()) Fail(own, abort_status_.load(), OpName(op), "the communicator was aborted");
  const Signature mine{
      static_cast<int64_t>(sequence_++), op, static_cast<int64_t>(count), dtype, reduce, root};
  if (!config_.check_signatures || config_.size == 1 || own.api->all_gather == nullptr) return;
  constexpr size_t kFields = sizeof(Signature) / sizeof(int64_t);
  std::vector<Signature> all(static_cast<size_t>(config_.size));
  chorus_collective_all_gather_args args{};
  args.struct_size = sizeof(args);
  args.send = &mine;
  args.recv = all.data();
  args.count = kFields;
  args.dtype = CHORUS_I64;
  chorus_request* request = nullptr;
  const std::string what = std::string(OpName(op)) + " #" + std::to_string(mine.sequence);
  Finish(own, own.api->all_gather(own.handle, &args, &request), request,
         (what + " (exchanging its signature)").c_str());
  for (size_t r = 0; r < all.size(); ++r) {
    if (std::memcmp(&all[r], &all[0], sizeof(Signature)) == 0) continue;
    throw Error(CHORUS_INVALID_ARGUMENT,
                "collective mismatch across workers at operation #" +
                    std::to_string(mine.sequence) + ": " + TaskName(0) + " issues " +
                    Describe(all[0]) + " but " + TaskName(static_cast<int>(r)) + " issues " +
                    Describe(all[r]) +
                    "; every worker must issue the same collectives, in the same order, with the "
                    "same sizes and dtypes");
  }
}

void Communicator::AllReduce(const void* send, void* recv, size_t count, chorus_dtype dtype,
                             chorus_reduce_op op) {
  if (op < 0 || op >= CHORUS_REDUCE_OP_COUNT) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "all_reduce: reduce op " + std::to_string(op) + " is not a chorus reduce op");
  }
  CheckSignature(kAllReduce, count, dtype, op, 0);
  if (count == 0) return;
  const Backend& b = Route(CHORUS_OP_ALL_REDUCE, count * chorus_dtype_size(dtype));
  chorus_all_reduce_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  args.op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;
  chorus_request* request = nullptr;
  Finish(b, b.api->all_reduce(b.handle, &args, &request), request, "all_reduce");
  if (op == CHORUS_REDUCE_MEAN) {
    internal::DivideHost(recv, count, dtype, static_cast<uint64_t>(config_.size));
  }
}

void Communicator::Broadcast(void* data, size_t count, chorus_dtype dtype, int root) {
  if (root < 0 || root >= config_.size) {
    throw Error(CHORUS_INVALID_ARGUMENT, "broadcast: root " + std::to_string(root) +
                                             " is not a rank of " + std::to_string(config_.size));
  }
  const Backend& b = Route(CHORUS_OP_BROADCAST, count * chorus_dtype_size(dtype));
  if (b.api->broadcast == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no broadcast");
  }
  CheckSignature(kBroadcast, count, dtype, CHORUS_REDUCE_SUM, root);
  if (count == 0 || config_.size == 1) return;
  chorus_collective_broadcast_args args{};
  args.struct_size = sizeof(args);
  args.data = data;
  args.count = count;
  args.dtype = dtype;
  args.root = root;
  chorus_request* request = nullptr;
  Finish(b, b.api->broadcast(b.handle, &args, &request), request, "broadcast");
}

void Communicator::AllGather(const void* send, void* recv, size_t count, chorus_dtype dtype) {
  const Backend& b = Route(CHORUS_OP_ALL_GATHER,
                           count * chorus_dtype_size(dtype) * static_cast<uint64_t>(config_.size));
  if (b.api->all_gather == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no all_gather");
  }
  CheckSignature(kAllGather, count, dtype, CHORUS_REDUCE_SUM, 0);
  if (count == 0) return;
  chorus_collective_all_gather_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  chorus_request* request = nullptr;
  Finish(b, b.api->all_gather(b.handle, &args, &request), request, "all_gather");
}

void Communicator::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                 chorus_dtype dtype, chorus_reduce_op op) {
  const Backend& b = Route(CHORUS_OP_REDUCE_SCATTER, recv_count * chorus_dtype_size(dtype) *
                                                         static_cast<uint64_t>(config_.size));
  if (b.api->reduce_scatter == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no reduce_scatter");
  }
  if (op < 0 || op >= CHORUS_REDUCE_OP_COUNT) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "reduce_scatter: reduce op " + std::to_string(op) + " is not a chorus reduce op");
  }
  CheckSignature(kReduceScatter, recv_count, dtype, op, 0);
  if (recv_count == 0) return;
  chorus_reduce_scatter_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.recv_count = recv_count;
  args.dtype = dtype;
  args.op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;
  chorus_request* request = nullptr;
  Finish(b, b.api->reduce_scatter(b.handle, &args, &request), request, "reduce_scatter");
  if (op == CHORUS_REDUCE_MEAN) {
    internal::DivideHost(recv, recv_count, dtype, static_cast<uint64_t>(config_.size));
  }
}

void Communicator::Barrier() {
  const Backend& b = backends_[0];
  if (b.api->barrier == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no barrier");
  }
  CheckSignature(kBarrier, 0, CHORUS_U8, CHORUS_REDUCE_SUM, 0);
  if (config_.size == 1) return;
  chorus_request* request = nullptr;
  Finish(b, b.api->barrier(b.handle, &request), request, "barrier");
}

CollectiveSelection SelectCollective(const Registry& registry,
                                     CommunicationImplementation implementation,
                                     const std::vector<Device>& local_devices, HostLayout layout) {
  const auto names = CollectiveNames(registry);
  const auto has = [&](const std::string& name) {
    for (const auto& n : names) {
      if (n == name) return true;
    }
    return false;
  };
  const auto ring = [&](const std::string& source) -> CollectiveSelection {
    if (has("ring_grpc")) return {"ring_grpc", source};
    return {kCoreRing, source + "; ring_grpc is not loaded, so the core's ring"};
  };
  const auto nccl = [&](const std::string& source) -> CollectiveSelection {
    if (!has("nccl")) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  source +
                      " asks for NCCL, but no nccl collective is loaded (build chorus with "
                      "CUDA and NCCL, or choose AUTO or RING)");
    }
    return {"nccl", source};
  };
  // The rules follow chorus-bench's figures on one machine (README, Benchmarks): shm is the
  // fastest at every size on one host; shm+core_ring beats flat core_ring and shm+gloo at every
  // size for hosts of 2; core_ring beats gloo (either algorithm) at every size, Gloo paying
  // 0.25-4 ms per call.
  const auto automatic = [&](const std::string& source) -> CollectiveSelection {
    bool all_gpu = !local_devices.empty();
    for (const auto& d : local_devices) all_gpu = all_gpu && d.info().kind == CHORUS_DEVICE_GPU;
    if (all_gpu && has("nccl")) return {"nccl", source + ": every device is a GPU"};
    if (layout.hosts == 1 && has("shm")) {
      return {"shm", source + ": every worker runs on one host and shm is loaded"};
    }
    if (layout.hosts > 1 && layout.workers_per_host > 1 && has("shm")) {
      return {std::string("shm+") + kCoreRing,
              source + ": " + std::to_string(layout.hosts) + " hosts of " +
                  std::to_string(layout.workers_per_host) +
                  " workers each: shm within a host, core_ring across"};
    }
    return {kCoreRing, source +
                           ": the core's ring (nccl wants GPUs; shm one host, or as many "
                           "workers on every host, and its plugin)"};
  };
  if (implementation == CommunicationImplementation::kRing)
    return ring("CommunicationOptions RING");
  if (implementation == CommunicationImplementation::kNccl)
    return nccl("CommunicationOptions NCCL");
  if (const auto value = GetEnv("CHORUS_COMMUNICATION"); value && !value->empty()) {
    const std::string source = "CHORUS_COMMUNICATION=" + *value;
    if (*value == "AUTO" || *value == "auto") return automatic(source);
    if (*value == "RING" || *value == "ring") return ring(source);
    if (*value == "NCCL" || *value == "nccl") return nccl(source);
    if (value->find('+') != std::string::npos) {
      return {CanonicalCollectiveName(registry, *value), source};
    }
    for (const auto& plugin : registry.plugins()) {
      if (auto* api = plugin->collective();
          api && (*value == api->name || *value == plugin->name())) {
        return {api->name, source};
      }
    }
    std::string available;
    for (const auto& n : names) available += ", " + n;
    throw Error(CHORUS_INVALID_ARGUMENT,
                source + " names no collective. Available: AUTO, RING, NCCL" + available + ".");
  }
  return automatic("default rule (AUTO)");
}

}  // namespace chorus
