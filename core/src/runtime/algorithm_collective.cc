#include "runtime/algorithm_collective.h"

#include <chorus/rendezvous/kv_store.h>

#include <algorithm>
#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/logging.h"
#include "builtin/builtin_plugin.h"
#include "builtin/ring_algorithm.h"
#include "rendezvous/c_kv_store_view.h"
#include "runtime/collective_p2p.h"

namespace chorus::internal {
namespace {

using sdk::Fail;
using sdk::Guard;
using sdk::RequireArgs;

constexpr std::string_view kTransportPrefix = "transport.";

struct Communicator {
  AlgorithmOverTransport what;
  int rank = 0;
  int size = 1;
  int64_t timeout_ms = -1;
  // The algorithm's options (owned strings, and the chorus_option view of them).
  std::vector<std::pair<std::string, std::string>> algorithm_options;
  std::vector<chorus_option> algorithm_option_view;
  std::unique_ptr<CKvStore> transport_store;  // the communicator's store, under its prefix
  chorus_job job{};                           // the communicator's, with the transport's store
  chorus_transport_endpoint* endpoint = nullptr;
  std::unique_ptr<CollectiveP2p> p2p;
  std::atomic<bool> aborted{false};
  std::mutex mutex;  // one operation at a time: the algorithm's messages must not interleave
  chorus_status failure_status = CHORUS_OK;  // after a failed operation
  std::string failure_message;

  ~Communicator() {
    p2p.reset();
    if (endpoint != nullptr) what.transport->destroy(endpoint);
  }
};

Communicator& Require(chorus_communicator* comm, const char* what) {
  if (comm == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "collective ", what, ": communicator is NULL");
  return *reinterpret_cast<Communicator*>(comm);
}

// Milliseconds left until `deadline`; -1 when there is no time-out.
int64_t Remaining(std::chrono::steady_clock::time_point deadline, int64_t timeout_ms) {
  if (timeout_ms < 0) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max<int64_t>(0, left.count());
}

std::string InfoKey(const std::string& prefix, int rank) {
  return prefix + "info/" + std::to_string(rank);
}

// The prefix of this communicator's keys: "<name>/<n>/" for the n-th communicator this rank
// creates over the store. A communicator created again after a failure (same store, same name)
// then never reads the addresses of the one before, whose ports are closed.
std::string KeyPrefix(const std::string& name, const chorus_kv_store& store, int rank) {
  const std::string key = name + "/creates/" + std::to_string(rank);
  int64_t generation = 0;
  const chorus_status status = store.add(store.ctx, key.c_str(), 1, &generation);
  if (status != CHORUS_OK) {
    Fail(status, name, ": rank ", rank, " could not update '", key, "' in the rendezvous store");
  }
  return name + "/" + std::to_string(generation) + "/";
}

std::string Info(int size) {
  return "size=" + std::to_string(size) + " abi=" + std::to_string(CHORUS_ABI_MAJOR) + "." +
         std::to_string(CHORUS_ABI_MINOR);
}

// Publishes this rank's (size, ABI) and checks every other rank's, lowest rank first, so that a
// rank given another size meets a mismatch rather than waiting for ranks that do not exist.
void ExchangeInfo(const std::string& name, const chorus_kv_store& store, const std::string& prefix,
                  int rank, int size, int64_t timeout_ms,
                  std::chrono::steady_clock::time_point deadline) {
  const std::string mine = Info(size);
  const std::string my_key = InfoKey(prefix, rank);
  chorus_status status = store.set(store.ctx, my_key.c_str(), mine.data(), mine.size());
  if (status != CHORUS_OK) {
    Fail(status, name, ": rank ", rank, " could not write '", my_key, "' to the rendezvous store");
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string key = InfoKey(prefix, peer);
    char value[128] = {};
    size_t length = 0;
    status = store.get(store.ctx, key.c_str(), Remaining(deadline, timeout_ms), value, sizeof value,
                       &length);
    if (status == CHORUS_TIMEOUT) {
      Fail(CHORUS_TIMEOUT, name, ": rank ", rank, " waited ", timeout_ms, " ms for rank ", peer,
           " to join ('", key,
           "' in the rendezvous store); is it started, with the same job and size?");
    }
    if (status != CHORUS_OK) {
      Fail(status, name, ": rank ", rank, " could not read '", key, "' from the rendezvous store");
    }
    const std::string theirs(value, std::min(length, sizeof value));
    if (theirs != mine) {
      Fail(CHORUS_INVALID_ARGUMENT, name, ": rank ", peer, " joined with ", theirs, ", but rank ",
           rank, " has ", mine, " (every rank must be given the same size and run the same ABI)");
    }
  }
}

void Destroy(chorus_communicator* comm) { delete reinterpret_cast<Communicator*>(comm); }

// Runs one collective through the communicator's algorithm, or the core's ring where the
// algorithm does not implement the operation.
void Run(Communicator& c, chorus_collective_op op, const void* send, void* recv, size_t count,
         chorus_dtype dtype, chorus_reduce_op reduce, int32_t root) {
  std::lock_guard<std::mutex> lock(c.mutex);
  const std::string& name = c.what.name;
  if (c.aborted.load()) {
    Fail(CHORUS_ABORTED, name, ": the communicator of rank ", c.rank, " was aborted");
  }
  if (c.failure_status != CHORUS_OK) {
    Fail(c.failure_status, name, ": the communicator of rank ", c.rank,
         " cannot be used after an earlier failure: ", c.failure_message);
  }
  const bool own = (c.what.algorithm->supported_ops & CHORUS_OP_BIT(op)) != 0;
  const chorus_algorithm_api& algorithm = own ? *c.what.algorithm : *RingAlgorithmTable();
  const chorus_plugin& plugin = own ? *c.what.algorithm_plugin : *BuiltinPluginTable();
  chorus_algorithm_run_args run{};
  run.struct_size = sizeof(run);
  run.op = op;
  run.send = send;
  run.recv = recv;
  run.count = count;
  run.dtype = dtype;
  run.op_reduce = reduce;
  run.root = root;
  run.p2p = c.p2p->get();
  run.timeout_ms = c.timeout_ms;
  run.options = c.algorithm_option_view.data();
  run.num_options = c.algorithm_option_view.size();
  run.context = algorithm.context;
  const chorus_status status = algorithm.run(&run);
  if (status == CHORUS_OK) return;
  std::string message = plugin.last_error != nullptr ? plugin.last_error() : "";
  if (message.empty() && c.p2p->failed()) message = c.p2p->failure_message();
  if (message.empty()) message = std::string("algorithm '") + algorithm.name + "' failed";
  if (c.p2p->failed()) {
    // The endpoint is aborted (which told the neighbours); later operations fail at once.
    c.p2p->FreeLeftovers();
    c.failure_status = status == CHORUS_PEER_LOST ? CHORUS_PEER_LOST : CHORUS_ABORTED;
    c.failure_message = message;
  }
  Fail(status, message);
}

template <typename Args>
const Args& Begin(const Args* args, chorus_request** request, size_t needed, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "collective ", what, ": request is NULL");
  *request = nullptr;  // every operation completes before it returns
  return RequireArgs(args, needed, what);
}

chorus_status AllReduce(chorus_communicator* comm, const chorus_all_reduce_args* args,
                        chorus_request** request) {
  return Guard([&] {
    const auto& a =
        Begin(args, request, CHORUS_STRUCT_SIZE(chorus_all_reduce_args, op), "all_reduce");
    Run(Require(comm, "all_reduce"), CHORUS_OP_ALL_REDUCE, a.send, a.recv, a.count, a.dtype, a.op,
        0);
  });
}

chorus_status Broadcast(chorus_communicator* comm, const chorus_collective_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    const auto& a = Begin(args, request, CHORUS_STRUCT_SIZE(chorus_collective_broadcast_args, root),
                          "broadcast");
    Run(Require(comm, "broadcast"), CHORUS_OP_BROADCAST, nullptr, a.data, a.count, a.dtype,
        CHORUS_REDUCE_SUM, a.root);
  });
}

chorus_status AllGather(chorus_communicator* comm, const chorus_collective_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    const auto& a = Begin(
        args, request, CHORUS_STRUCT_SIZE(chorus_collective_all_gather_args, dtype), "all_gather");
    Run(Require(comm, "all_gather"), CHORUS_OP_ALL_GATHER, a.send, a.recv, a.count, a.dtype,
        CHORUS_REDUCE_SUM, 0);
  });
}

chorus_status ReduceScatter(chorus_communicator* comm, const chorus_reduce_scatter_args* args,
                            chorus_request** request) {
  return Guard([&] {
    const auto& a =
        Begin(args, request, CHORUS_STRUCT_SIZE(chorus_reduce_scatter_args, op), "reduce_scatter");
    Run(Require(comm, "reduce_scatter"), CHORUS_OP_REDUCE_SCATTER, a.send, a.recv, a.recv_count,
        a.dtype, a.op, 0);
  });
}

chorus_status Barrier(chorus_communicator* comm, chorus_request** request) {
  return Guard([&] {
    if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "collective barrier: request is NULL");
    *request = nullptr;
    Run(Require(comm, "barrier"), CHORUS_OP_BARRIER, nullptr, nullptr, 0, CHORUS_U8,
        CHORUS_REDUCE_SUM, 0);
  });
}

void Abort(chorus_communicator* comm) {
  if (comm == nullptr) return;
  auto* c = reinterpret_cast<Communicator*>(comm);
  c->aborted.store(true);
  if (c->endpoint != nullptr) c->what.transport->abort(c->endpoint);
}

}  // namespace

chorus_status CreateAlgorithmCommunicator(const AlgorithmOverTransport& what,
                                          const chorus_communicator_create_args* args,
                                          chorus_communicator** out) {
  const std::string& name = what.name;
  if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, name, " create: out is NULL");
  *out = nullptr;
  const auto& a =
      RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_communicator_create_args, num_options),
                  (name + " create").c_str());
  if (CHORUS_HAS_FIELD(&a, chorus_communicator_create_args, devices_api) &&
      a.devices_api != nullptr &&
      (a.devices_api->platform == nullptr || std::strcmp(a.devices_api->platform, "cpu") != 0)) {
    Fail(CHORUS_UNSUPPORTED, name, " works on host memory only, not on ",
         a.devices_api->platform ? a.devices_api->platform : "(unnamed)", " devices");
  }
  if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
    Fail(CHORUS_INVALID_ARGUMENT, name, " create: rank ", a.rank, " of size ", a.size,
         " is not a valid rank (0 <= rank < size)");
  }
  if (a.store == nullptr || a.store->struct_size < CHORUS_STRUCT_SIZE(chorus_kv_store, remove)) {
    Fail(CHORUS_INVALID_ARGUMENT, name, " create: the rendezvous store is NULL or too small");
  }
  if (a.options == nullptr && a.num_options > 0) {
    Fail(CHORUS_INVALID_ARGUMENT, name, " create: options are NULL");
  }
  auto comm = std::make_unique<Communicator>();
  comm->what = what;
  comm->rank = a.rank;
  comm->size = a.size;
  comm->timeout_ms = a.timeout_ms;
  std::vector<chorus_option> transport_options;
  for (size_t i = 0; i < a.num_options; ++i) {
    const std::string_view key = a.options[i].key == nullptr ? "" : a.options[i].key;
    const char* value = a.options[i].value == nullptr ? "" : a.options[i].value;
    if (key == "host") {
      transport_options.push_back({a.options[i].key, value});
    } else if (key.substr(0, kTransportPrefix.size()) == kTransportPrefix) {
      transport_options.push_back({a.options[i].key + kTransportPrefix.size(), value});
    } else {
      // The core's ring checks its option here, so a bad one fails at create, as it always did.
      if (key == "segment_bytes" && what.algorithm == RingAlgorithmTable() &&
          sdk::IntegerOption(&a.options[i], 1, key, 0) == 0) {
        Fail(CHORUS_INVALID_ARGUMENT, name, ": option segment_bytes must be at least 1");
      }
      comm->algorithm_options.emplace_back(std::string(key), value);
    }
  }
  for (const auto& [key, value] : comm->algorithm_options) {
    comm->algorithm_option_view.push_back({key.c_str(), value.c_str()});
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(
                                             0, std::min<int64_t>(a.timeout_ms, INT64_C(1) << 40)));
  const std::string prefix = KeyPrefix(name, *a.store, a.rank);
  ExchangeInfo(name, *a.store, prefix, a.rank, a.size, a.timeout_ms, deadline);
  comm->transport_store = std::make_unique<CKvStore>(WithPrefix(ViewOfCStore(a.store), prefix));
  // Without an option "host", a transport listens at the address the cluster spec gives this
  // rank (1.1), which the other ranks must reach.
  const std::string address(sdk::CreateAddress(a)), host_id(sdk::CreateHostId(a));

  chorus_transport_create_args transport{};
  transport.struct_size = sizeof(transport);
  transport.rank = a.rank;
  transport.size = a.size;
  transport.store = comm->transport_store->get();
  transport.timeout_ms = Remaining(deadline, a.timeout_ms);
  transport.options = transport_options.data();
  transport.num_options = transport_options.size();
  transport.address = address.empty() ? nullptr : address.c_str();
  transport.host_id = host_id.empty() ? nullptr : host_id.c_str();
  transport.context = what.transport->context;
  // The transport is the communicator's only part a plugin sees as an object: it gets the
  // communicator's object id (1.6), and its job with its own store.
  if (CHORUS_HAS_FIELD(&a, chorus_communicator_create_args, object_id) && a.job != nullptr &&
      a.object_id != nullptr) {
    comm->job = *a.job;
    comm->job.struct_size = sizeof(comm->job);
    comm->job.store = transport.store;
    comm->job.timeout_ms = transport.timeout_ms;
    transport.job = &comm->job;
    transport.object_id = a.object_id;
  }
  const chorus_status status = what.transport->create(&transport, &comm->endpoint);
  if (status != CHORUS_OK) {
    comm->endpoint = nullptr;
    const char* message = what.transport_plugin->last_error();
    Fail(status, name, ": transport '", what.transport->name,
         "' could not create its endpoint: ", message != nullptr ? message : "");
  }
  comm->p2p = std::make_unique<CollectiveP2p>(*what.transport_plugin, *what.transport,
                                              comm->endpoint, a.rank, a.size);
  *out = reinterpret_cast<chorus_communicator*>(comm.release());
  return CHORUS_OK;
}

chorus_collective_api AlgorithmCollectiveTable(
    const char* name,
    chorus_status (*create)(const chorus_communicator_create_args*, chorus_communicator**),
    const chorus_capabilities* capabilities) {
  chorus_collective_api t{};
  t.struct_size = sizeof(t);
  t.name = name;
  t.create = create;
  t.destroy = Destroy;
  t.all_reduce = AllReduce;
  t.broadcast = Broadcast;
  t.all_gather = AllGather;
  t.reduce_scatter = ReduceScatter;
  t.barrier = Barrier;
  t.abort = Abort;
  t.capabilities = capabilities;
  return t;
}

}  // namespace chorus::internal
