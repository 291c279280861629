// The plugin's tables: one collective, "ring_grpc". Every function checks its arguments, runs
// inside sdk::Guard and completes before it returns (*request = NULL).
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <memory>
#include <string>

#include "communicator.h"
#include "options.h"

// The object behind a chorus_communicator* handle.
struct chorus_communicator {
  explicit chorus_communicator(const chorus::ring_grpc::CommunicatorConfig& config)
      : ring(config) {}
  chorus::ring_grpc::RingCommunicator ring;
};

namespace chorus::ring_grpc {
namespace {

using sdk::Fail;
using sdk::Guard;
using sdk::RequireArgs;

constexpr char kName[] = "ring_grpc";

// ---- Argument checks --------------------------------------------------------------------------

RingCommunicator& RequireCommunicator(chorus_communicator* comm, const char* what) {
  if (comm == nullptr) Fail(CHORUS_INVALID_ARGUMENT, kName, " ", what, ": communicator is NULL");
  return comm->ring;
}

void NoRequest(chorus_request** request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, kName, " ", what, ": request is NULL");
  *request = nullptr;
}

// count * dtype size * blocks, refusing an overflow.
size_t Bytes(size_t count, chorus_dtype dtype, size_t blocks, const char* what) {
  const size_t element = chorus_dtype_size(dtype);
  if (count > SIZE_MAX / element / blocks) {
    Fail(CHORUS_INVALID_ARGUMENT, kName, " ", what, ": count ", count, " is too large");
  }
  return count * element * blocks;
}

void RequireBuffer(const void* buffer, size_t bytes, const char* what, const char* name) {
  if (bytes > 0 && buffer == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, kName, " ", what, ": ", name, " is NULL");
  }
}

// Host memory never has a stream.
void RequireNoStream(const chorus_stream* stream, const char* what) {
  if (stream != nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, kName, " ", what,
         ": a stream was passed, but this collective works on host memory, which takes none");
  }
}

// ---- The collective table ---------------------------------------------------------------------

chorus_status Create(const chorus_communicator_create_args* args, chorus_communicator** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, kName, " create: out is NULL");
    *out = nullptr;
    const auto& a = RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_communicator_create_args, num_options), "ring_grpc create");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, kName, " create: rank ", a.rank, " of size ", a.size,
           " is not a rank of the ring");
    }
    if (CHORUS_HAS_FIELD(&a, chorus_communicator_create_args, devices_api) &&
        a.devices_api != nullptr &&
        (a.devices_api->platform == nullptr || std::strcmp(a.devices_api->platform, "cpu") != 0)) {
      Fail(CHORUS_UNSUPPORTED, kName, " works on host memory; the '",
           a.devices_api->platform ? a.devices_api->platform : "?",
           "' platform's memory is not supported");
    }
    if (a.size > 1) {
      if (a.store == nullptr) Fail(CHORUS_INVALID_ARGUMENT, kName, " create: store is NULL");
      if (!CHORUS_HAS_FIELD(a.store, chorus_kv_store, get) || a.store->set == nullptr ||
          a.store->get == nullptr) {
        Fail(CHORUS_INVALID_ARGUMENT, kName, " create: the store lacks set or get");
      }
    }
    CommunicatorConfig config;
    config.rank = a.rank;
    config.size = a.size;
    config.store = a.store;
    config.timeout_ms = a.timeout_ms;
    config.options = ParseOptions(a.options, a.num_options);
    // Without the option, listen at the address the cluster spec gives this rank (1.1).
    if (config.options.host.empty()) config.options.host = std::string(sdk::CreateAddress(a));
    if (config.options.host.empty()) config.options.host = "127.0.0.1";
    try {
      *out = new chorus_communicator(config);
    } catch (const sdk::Error& e) {
      Fail(e.status(), kName, " create (rank ", a.rank, " of ", a.size, "): ", e.what());
    }
    if (sdk::LogEnabled(CHORUS_LOG_DEBUG)) {
      sdk::Log(CHORUS_LOG_DEBUG, std::string(kName) + ": rank " + std::to_string(a.rank) + " of " +
                                     std::to_string(a.size) + " connected");
    }
  });
}

void Destroy(chorus_communicator* comm) { delete comm; }

chorus_status AllReduce(chorus_communicator* comm, const chorus_all_reduce_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "all_reduce");
    RingCommunicator& ring = RequireCommunicator(comm, "all_reduce");
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_reduce_args, stream),
                                "ring_grpc all_reduce");
    sdk::RequireDtype(a.dtype, "ring_grpc all_reduce");
    sdk::RequireReduceOp(a.op, "ring_grpc all_reduce");
    RequireNoStream(a.stream, "all_reduce");
    const size_t bytes = Bytes(a.count, a.dtype, 1, "all_reduce");
    RequireBuffer(a.send, bytes, "all_reduce", "send");
    RequireBuffer(a.recv, bytes, "all_reduce", "recv");
    ring.AllReduce(a.send, a.recv, a.count, a.dtype, a.op);
  });
}

chorus_status Broadcast(chorus_communicator* comm, const chorus_collective_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "broadcast");
    RingCommunicator& ring = RequireCommunicator(comm, "broadcast");
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_collective_broadcast_args, stream),
                                "ring_grpc broadcast");
    sdk::RequireDtype(a.dtype, "ring_grpc broadcast");
    RequireNoStream(a.stream, "broadcast");
    if (a.root < 0 || a.root >= ring.size()) {
      Fail(CHORUS_INVALID_ARGUMENT, kName, " broadcast: root ", a.root, " is not a rank of ",
           ring.size());
    }
    RequireBuffer(a.data, Bytes(a.count, a.dtype, 1, "broadcast"), "broadcast", "data");
    ring.Broadcast(a.data, a.count, a.dtype, a.root);
  });
}

chorus_status AllGather(chorus_communicator* comm, const chorus_collective_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "all_gather");
    RingCommunicator& ring = RequireCommunicator(comm, "all_gather");
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_collective_all_gather_args, stream),
                                "ring_grpc all_gather");
    sdk::RequireDtype(a.dtype, "ring_grpc all_gather");
    RequireNoStream(a.stream, "all_gather");
    RequireBuffer(a.send, Bytes(a.count, a.dtype, 1, "all_gather"), "all_gather", "send");
    RequireBuffer(a.recv, Bytes(a.count, a.dtype, static_cast<size_t>(ring.size()), "all_gather"),
                  "all_gather", "recv");
    ring.AllGather(a.send, a.recv, a.count, a.dtype);
  });
}

chorus_status ReduceScatter(chorus_communicator* comm, const chorus_reduce_scatter_args* args,
                            chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "reduce_scatter");
    RingCommunicator& ring = RequireCommunicator(comm, "reduce_scatter");
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_scatter_args, stream),
                                "ring_grpc reduce_scatter");
    sdk::RequireDtype(a.dtype, "ring_grpc reduce_scatter");
    sdk::RequireReduceOp(a.op, "ring_grpc reduce_scatter");
    RequireNoStream(a.stream, "reduce_scatter");
    RequireBuffer(a.send,
                  Bytes(a.recv_count, a.dtype, static_cast<size_t>(ring.size()), "reduce_scatter"),
                  "reduce_scatter", "send");
    RequireBuffer(a.recv, Bytes(a.recv_count, a.dtype, 1, "reduce_scatter"), "reduce_scatter",
                  "recv");
    ring.ReduceScatter(a.send, a.recv, a.recv_count, a.dtype, a.op);
  });
}

chorus_status Barrier(chorus_communicator* comm, chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "barrier");
    RequireCommunicator(comm, "barrier").Barrier();
  });
}

// abort() returns nothing, so a failure in it (it allocates the failure it passes on) can only be
// logged; it must not escape.
void Abort(chorus_communicator* comm) {
  if (comm == nullptr) return;
  if (Guard([&] { comm->ring.Abort(); }) != CHORUS_OK) {
    (void)Guard(
        [] { sdk::Log(CHORUS_LOG_WARN, std::string("ring_grpc abort: ") + sdk::LastError()); });
  }
}

// ---- The plugin table -------------------------------------------------------------------------

void CheckHost(const chorus_host& host) {
  if (!CHORUS_HAS_FIELD(&host, chorus_host, reduce_host) || host.log == nullptr ||
      host.log_enabled == nullptr || host.abort_requested == nullptr ||
      host.reduce_host == nullptr) {
    Fail(CHORUS_UNSUPPORTED,
         "ring-grpc needs the host's log, abort_requested and reduce_host services (chorus ABI "
         "1.0); this core's chorus_host lacks one");
  }
}

// What tf.distribute's CommunicationImplementation.RING names: ring collectives over gRPC. For
// AUTO it stays below the core's ring, which beat it at every size on loopback (README,
// Benchmarks); a RING request prefers it to the core's ring.
uint32_t Score(const chorus_score_args* args) {
  switch (args->request) {
    case CHORUS_REQUEST_AUTO:
      return 4;
    case CHORUS_REQUEST_RING:
      return 60;
    default:
      return 0;
  }
}
const chorus_capabilities kCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps, Score);

const chorus_collective_api kCollective = [] {
  chorus_collective_api t{};
  t.struct_size = sizeof(t);
  t.name = kName;  // CHORUS_COMMUNICATION=ring_grpc (or RING) selects it
  t.create = Create;
  t.destroy = Destroy;
  t.all_reduce = AllReduce;
  t.broadcast = Broadcast;
  t.all_gather = AllGather;
  t.reduce_scatter = ReduceScatter;
  t.barrier = Barrier;
  t.abort = Abort;
  t.capabilities = &kCapabilities;
  return t;
}();

const chorus_plugin kPlugin = [] {
  chorus_plugin t = sdk::PluginTable(
      "ring-grpc",  // libchorus-ring-grpc.so
      "1.1.0",
      "CommunicationImplementation.RING: ring collectives over gRPC streams, chunked and "
      "pipelined",
      CheckHost);
  t.collective = &kCollective;
  return t;
}();

}  // namespace
}  // namespace chorus::ring_grpc

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::ring_grpc::kPlugin;
}
