// A test-only collective plugin, "bench_wrong", whose operations return wrong data: all_reduce
// copies the rank's own input (no reduction), broadcast leaves every buffer as it is,
// all_gather fills only the rank's own block, reduce_scatter copies the rank's own block
// unreduced. Nothing crosses processes, barrier returns at once. i8 all-reduces are refused as
// UNSUPPORTED. It exists so that the chorus-bench tests can check that #wrong catches a backend
// that computes the wrong answer, and that a dtype a backend refuses is a clear error.
// Its transport, also "bench_wrong", delivers nothing: every send and receive completes at once
// and a receive leaves its buffer as it was, so chorus-bench --transports must count wrong bytes.
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <cstring>

struct chorus_communicator {
  int rank = 0;
  int size = 1;
};

struct chorus_transport_endpoint {};

// Every request of the transport: finished when it is made.
struct chorus_request {};

namespace {

using chorus::sdk::Guard;

chorus_status Create(const chorus_communicator_create_args* args, chorus_communicator** out) {
  return Guard([&] {
    chorus::sdk::RequireArgs(args, sizeof(*args), "create");
    *out = new chorus_communicator{args->rank, args->size};
  });
}

void Destroy(chorus_communicator* comm) { delete comm; }

chorus_status AllReduce(chorus_communicator*, const chorus_all_reduce_args* args,
                        chorus_request** request) {
  *request = nullptr;
  if (args->dtype == CHORUS_I8) {
    return chorus::sdk::SetError(CHORUS_UNSUPPORTED, "bench_wrong does not support dtype i8");
  }
  if (args->send != args->recv && args->count > 0) {
    std::memcpy(args->recv, args->send, args->count * chorus_dtype_size(args->dtype));
  }
  return CHORUS_OK;
}

chorus_status Broadcast(chorus_communicator*, const chorus_collective_broadcast_args*,
                        chorus_request** request) {
  *request = nullptr;
  return CHORUS_OK;
}

chorus_status AllGather(chorus_communicator* comm, const chorus_collective_all_gather_args* args,
                        chorus_request** request) {
  *request = nullptr;
  const size_t bytes = args->count * chorus_dtype_size(args->dtype);
  auto* own = static_cast<unsigned char*>(args->recv) + static_cast<size_t>(comm->rank) * bytes;
  if (own != args->send && bytes > 0) std::memmove(own, args->send, bytes);
  return CHORUS_OK;
}

chorus_status ReduceScatter(chorus_communicator* comm, const chorus_reduce_scatter_args* args,
                            chorus_request** request) {
  *request = nullptr;
  const size_t bytes = args->recv_count * chorus_dtype_size(args->dtype);
  const auto* own =
      static_cast<const unsigned char*>(args->send) + static_cast<size_t>(comm->rank) * bytes;
  if (own != args->recv && bytes > 0) std::memmove(args->recv, own, bytes);
  return CHORUS_OK;
}

chorus_status Barrier(chorus_communicator*, chorus_request** request) {
  *request = nullptr;
  return CHORUS_OK;
}

void Abort(chorus_communicator*) {}

// No capabilities: it is chosen only by name, never by AUTO.
const chorus_collective_api kCollective = [] {
  chorus_collective_api t{};
  t.struct_size = sizeof(t);
  t.name = "bench_wrong";
  t.create = Create;
  t.destroy = Destroy;
  t.all_reduce = AllReduce;
  t.broadcast = Broadcast;
  t.all_gather = AllGather;
  t.reduce_scatter = ReduceScatter;
  t.barrier = Barrier;
  t.abort = Abort;
  return t;
}();

chorus_status CreateEndpoint(const chorus_transport_create_args* args,
                             chorus_transport_endpoint** out) {
  return Guard([&] {
    chorus::sdk::RequireArgs(args, sizeof(*args), "create");
    *out = new chorus_transport_endpoint{};
  });
}

void DestroyEndpoint(chorus_transport_endpoint* endpoint) { delete endpoint; }

chorus_status CompleteAtOnce(chorus_transport_endpoint*, const chorus_p2p_args*,
                             chorus_request** request) {
  return Guard([&] { *request = new chorus_request{}; });
}

void AbortEndpoint(chorus_transport_endpoint*) {}

const chorus_transport_api kTransport = [] {
  chorus_transport_api t{};
  t.struct_size = sizeof(t);
  t.name = "bench_wrong";
  t.create = CreateEndpoint;
  t.destroy = DestroyEndpoint;
  t.isend = CompleteAtOnce;
  t.irecv = CompleteAtOnce;
  t.abort = AbortEndpoint;
  return t;
}();

const chorus_transport_api* const kTransports[] = {&kTransport};

chorus_status RequestTest(chorus_request*, int* done) {
  *done = 1;
  return CHORUS_OK;
}

chorus_status RequestWait(chorus_request*, int64_t) { return CHORUS_OK; }

void RequestFree(chorus_request* request) { delete request; }

const chorus_plugin kPlugin = [] {
  chorus_plugin t = chorus::sdk::PluginTable(
      "bench_wrong", "test", "chorus-bench test plugin: a collective that returns wrong results");
  t.collective = &kCollective;
  t.transport = &kTransport;
  t.transport_list = kTransports;
  t.num_transports = 1;
  t.request_test = RequestTest;
  t.request_wait = RequestWait;
  t.request_free = RequestFree;
  return t;
}();

}  // namespace

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &kPlugin;
}
