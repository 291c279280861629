// plugin_table.cc: the ucx plugin's C tables (plugin.h interface 5, transport "ucx") over
// chorus::ucx::Endpoint. Every entry point runs inside sdk::Guard.
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <memory>

#include "options.h"
#include "tag_layout.h"
#include "transport_path.h"
#include "ucx_endpoint.h"

namespace {

using chorus::sdk::Fail;
using chorus::ucx::Endpoint;
using chorus::ucx::Request;

Endpoint& RequireEndpoint(chorus_transport_endpoint* endpoint, const char* what) {
  if (endpoint == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": endpoint is NULL");
  return *reinterpret_cast<Endpoint*>(endpoint);
}

Request& RequireRequest(chorus_request* request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": request is NULL");
  return *reinterpret_cast<Request*>(request);
}

chorus_status Create(const chorus_transport_create_args* args, chorus_transport_endpoint** out) {
  return chorus::sdk::Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "ucx create: out is NULL");
    *out = nullptr;
    const auto& a = chorus::sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_transport_create_args, num_options), "ucx create");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "ucx create: rank ", a.rank, " of size ", a.size,
           " is not a rank (0 <= rank < size)");
    }
    if (a.size > chorus::ucx::kMaxRanks) {
      Fail(CHORUS_INVALID_ARGUMENT, "ucx create: ", a.size, " ranks; the ucx transport's tag ",
           "layout holds ", chorus::ucx::kMaxRanks, " at most");
    }
    const chorus::ucx::EndpointOptions options =
        chorus::ucx::ParseOptions(a.options, a.num_options, chorus::sdk::CreateAddress(a));
    *out = reinterpret_cast<chorus_transport_endpoint*>(new Endpoint(a, options));
  });
}

void Destroy(chorus_transport_endpoint* endpoint) { delete reinterpret_cast<Endpoint*>(endpoint); }

// The checks isend and irecv share; clears *request.
const chorus_p2p_args& StartArgs(chorus_transport_endpoint* endpoint, const chorus_p2p_args* args,
                                 chorus_request** request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": request is NULL");
  *request = nullptr;
  const Endpoint& e = RequireEndpoint(endpoint, what);
  const auto& a = chorus::sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_p2p_args, bytes), what);
  if (a.peer < 0 || a.peer >= e.size()) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": peer ", a.peer, " is not a rank of ", e.size());
  }
  if (a.bytes > 0 && a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": data is NULL");
  return a;
}

chorus_status Isend(chorus_transport_endpoint* endpoint, const chorus_p2p_args* args,
                    chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = StartArgs(endpoint, args, request, "ucx isend");
    *request = reinterpret_cast<chorus_request*>(
        RequireEndpoint(endpoint, "ucx isend").Send(a.peer, a.tag, a.data, a.bytes));
  });
}

chorus_status Irecv(chorus_transport_endpoint* endpoint, const chorus_p2p_args* args,
                    chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = StartArgs(endpoint, args, request, "ucx irecv");
    *request = reinterpret_cast<chorus_request*>(
        RequireEndpoint(endpoint, "ucx irecv").Receive(a.peer, a.tag, a.data, a.bytes));
  });
}

void Abort(chorus_transport_endpoint* endpoint) {
  if (endpoint != nullptr) reinterpret_cast<Endpoint*>(endpoint)->Abort();
}

// A finished request's status, with its message as this thread's last error.
chorus_status Result(const Request& r) {
  return r.status == CHORUS_OK ? CHORUS_OK : chorus::sdk::SetError(r.status, r.message);
}

chorus_status RequestTest(chorus_request* request, int* done) {
  chorus_status result = CHORUS_OK;
  const chorus_status status = chorus::sdk::Guard([&] {
    Request& r = RequireRequest(request, "ucx request_test");
    if (done == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "ucx request_test: done is NULL");
    *done = (r.endpoint == nullptr || r.endpoint->Test(r)) ? 1 : 0;
    if (*done != 0) result = Result(r);
  });
  return status != CHORUS_OK ? status : result;
}

chorus_status RequestWait(chorus_request* request, int64_t timeout_ms) {
  chorus_status result = CHORUS_OK;
  const chorus_status status = chorus::sdk::Guard([&] {
    Request& r = RequireRequest(request, "ucx request_wait");
    if (r.endpoint != nullptr && !r.endpoint->Wait(r, timeout_ms)) {
      Fail(CHORUS_TIMEOUT, "ucx: the ", r.receive ? "receive from" : "send to", " rank ", r.peer,
           " (tag ", r.tag, ", ", r.bytes, " bytes) did not finish in ", timeout_ms,
           " ms; the request is still live");
    }
    result = Result(r);
  });
  return status != CHORUS_OK ? status : result;
}

void RequestFree(chorus_request* request) {
  if (request == nullptr) return;
  Request* r = reinterpret_cast<Request*>(request);
  if (r->endpoint == nullptr) {
    delete r;  // its endpoint is gone
  } else {
    r->endpoint->Free(r);
  }
}

// ---- The plugin table -------------------------------------------------------------------------

// AUTO: the path a pair's bytes take, found once per process (transport_path.h): UCT's
// transports as UCX_TLS and UCX_*_DEVICES filter them, and how same-host peers are connected
// (CHORUS_UCX_SAME_HOST). Shared memory 30 and RDMA 40, general-purpose transports faster than the
// core's tcp (10); tcp loopback or tcp between hosts 8: over UCX's tcp with peer failure handling
// ring@ucx ran at 0.5-1.2x core_ring's speed on 2 cores (below it from 64 KiB to 1 MiB), so AUTO
// keeps ring@tcp there. One host: the
// same-host path; one rank per host: the cross-host path; else the lower (a ring goes at its
// slowest link's pace). 0 for a path UCX cannot take (UCX_TLS=sm,self across hosts), and 8 when
// UCT's query failed. Every rank answers alike where the hosts have the same transports and
// environment. 0 for RING: tf.distribute's RING asks for its ring over TCP sockets, which the
// core's tcp (50) and ring-grpc carry as TensorFlow does. 0 for NCCL: that asks for NVIDIA's
// library on the devices, and this transport carries host memory only.
uint32_t Score(const chorus_score_args* args) {
  return args != nullptr ? chorus::ucx::ProcessScore(*args) : 0;
}

const chorus_capabilities kCapabilities = chorus::sdk::Capabilities(
    chorus::sdk::kHostMemory, CHORUS_SHAPE_ANY, chorus::sdk::kAllCollectiveOps, Score);

const chorus_transport_api kTransport = [] {
  chorus_transport_api t{};
  t.struct_size = sizeof(t);
  t.name = "ucx";
  t.create = Create;
  t.destroy = Destroy;
  t.isend = Isend;
  t.irecv = Irecv;
  t.abort = Abort;
  t.capabilities = &kCapabilities;
  return t;
}();

const chorus_plugin kPlugin = [] {
  chorus_plugin t = chorus::sdk::PluginTable(
      "ucx", "1.0.0", "transport 'ucx': point-to-point messages over UCX (UCP tagged messages)");
  t.request_test = RequestTest;
  t.request_wait = RequestWait;
  t.request_free = RequestFree;
  t.transport = &kTransport;
  return t;
}();

}  // namespace

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &kPlugin;
}
