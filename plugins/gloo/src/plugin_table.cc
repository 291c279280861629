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

chorus_status Init(const chorus_host* host) {
  return Guard([&] {
    sdk::RequireHost(host, "gloo");
    sdk::SetHost(host);
  });
}

void Shutdown() { sdk::SetHost(nullptr); }

const char* LastError() { return sdk::LastError(); }

// No operation returns a request, so none of these ever gets a valid one.
chorus_status RequestTest(chorus_request*, int*) {
  return sdk::SetError(CHORUS_INVALID_ARGUMENT,
                       "gloo: this plugin completes every operation before returning and never "
                       "creates a request");
}
chorus_status RequestWait(chorus_request*, int64_t) { return RequestTest(nullptr, nullptr); }
void RequestFree(chorus_request*) {}

const chorus_collective_api kCollective = {
    .struct_size = sizeof(chorus_collective_api),
    .name = "gloo",  // what CHORUS_COMMUNICATION=gloo selects
    .create = Create,
    .destroy = Destroy,
    .all_reduce = AllReduce,
    .broadcast = Broadcast,
    .all_gather = AllGather,
    .reduce_scatter = ReduceScatter,
    .barrier = Barrier,
    .abort = Abort,
};

const chorus_plugin kPlugin = {
    .struct_size = sizeof(chorus_plugin),
    .abi_major = CHORUS_ABI_MAJOR,
    .abi_minor = CHORUS_ABI_MINOR,
    .name = "gloo",
    .version = "1.0.0 (Gloo " CHORUS_GLOO_STRINGIFY(GLOO_VERSION_MAJOR) "." CHORUS_GLOO_STRINGIFY(
        GLOO_VERSION_MINOR) "." CHORUS_GLOO_STRINGIFY(GLOO_VERSION_PATCH) ")",
    .description =
        "collective 'gloo': all_reduce (ring, ring_chunked, bcube), broadcast, "
        "all_gather, reduce_scatter, barrier over Gloo's TCP transport",
    .init = Init,
    .shutdown = Shutdown,
    .last_error = LastError,
    .request_test = RequestTest,
    .request_wait = RequestWait,
    .request_free = RequestFree,
    .device_enumerator = nullptr,
    .cross_device_ops = nullptr,
    .collective = &kCollective,
    .algorithm = nullptr,
    .transport = nullptr,
};

}  // namespace
}  // namespace chorus::gloo_plugin

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::gloo_plugin::kPlugin;
}
