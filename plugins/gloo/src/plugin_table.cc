// The exported entry point and the plugin's tables: thin C wrappers that check the handle and the
// arguments, run the C++ implementation under sdk::Guard and complete every operation before
// returning (*request = NULL).
#include <chorus/plugin.h>
#include <gloo/config.h>

#include <chorus/plugin_sdk.hpp>
#include <memory>

#include "arguments.h"
#include "communicator.h"

struct chorus_communicator {
  explicit chorus_communicator(const chorus_communicator_create_args& args) : impl(args) {}
  chorus::gloo_plugin::GlooCommunicator impl;
};

namespace chorus::gloo_plugin {
namespace {

using sdk::Fail;
using sdk::Guard;

#define CHORUS_GLOO_STRINGIFY2(x) #x
#define CHORUS_GLOO_STRINGIFY(x) CHORUS_GLOO_STRINGIFY2(x)

GlooCommunicator& Comm(chorus_communicator* comm, const char* what) {
  if (comm == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "gloo ", what, ": communicator is NULL");
  return comm->impl;
}

// Every operation finishes before returning, so *request is always NULL.
void NoRequest(chorus_request** request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "gloo ", what, ": request is NULL");
  *request = nullptr;
}

chorus_status Create(const chorus_communicator_create_args* args, chorus_communicator** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "gloo create: out is NULL");
    *out = nullptr;
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_communicator_create_args, num_options), "gloo create");
    *out = std::make_unique<chorus_communicator>(a).release();
  });
}

void Destroy(chorus_communicator* comm) { delete comm; }

chorus_status AllReduce(chorus_communicator* comm, const chorus_all_reduce_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "all_reduce");
    GlooCommunicator& c = Comm(comm, "all_reduce");
    c.AllReduce(CheckAllReduce(args));
  });
}

chorus_status Broadcast(chorus_communicator* comm, const chorus_collective_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "broadcast");
    GlooCommunicator& c = Comm(comm, "broadcast");
    c.Broadcast(CheckBroadcast(args, c.size()));
  });
}

chorus_status AllGather(chorus_communicator* comm, const chorus_collective_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "all_gather");
    GlooCommunicator& c = Comm(comm, "all_gather");
    c.AllGather(CheckAllGather(args, c.size()));
  });
}

chorus_status ReduceScatter(chorus_communicator* comm, const chorus_reduce_scatter_args* args,
                            chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "reduce_scatter");
    GlooCommunicator& c = Comm(comm, "reduce_scatter");
    c.ReduceScatter(CheckReduceScatter(args, c.size()));
  });
}

chorus_status Barrier(chorus_communicator* comm, chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "barrier");
    Comm(comm, "barrier").Barrier();
  });
}

void Abort(chorus_communicator* comm) {
  if (comm != nullptr) comm->impl.Abort();
}

// Gloo (ring_chunked, then ring) lost to the core's ring at every size on loopback (README,
// Benchmarks; plugins/gloo/README.md): AUTO keeps it below the reference,
// CHORUS_COMMUNICATION=gloo chooses it. RING means tf.distribute's ring over gRPC, which it is not.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 3 : 0;
}
const chorus_capabilities kCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps, Score);

const chorus_collective_api kCollective = [] {
  chorus_collective_api t{};
  t.struct_size = sizeof(t);
  t.name = "gloo";  // what CHORUS_COMMUNICATION=gloo selects
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
      "gloo",
      "1.1.0 (Gloo " CHORUS_GLOO_STRINGIFY(GLOO_VERSION_MAJOR) "." CHORUS_GLOO_STRINGIFY(
          GLOO_VERSION_MINOR) "." CHORUS_GLOO_STRINGIFY(GLOO_VERSION_PATCH) ")",
      "collective 'gloo': all_reduce (ring, ring_chunked, bcube), broadcast, all_gather, "
      "reduce_scatter, barrier over Gloo's TCP transport");
  t.collective = &kCollective;
  return t;
}();

}  // namespace
}  // namespace chorus::gloo_plugin

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::gloo_plugin::kPlugin;
}
