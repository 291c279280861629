// The "ofi" plugin's table: one transport, "ofi", over libfabric (plugin.h interface 5).
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>

#include "ofi_endpoint.h"

using chorus::sdk::Fail;

namespace {

using Endpoint = chorus_transport_endpoint;

chorus_status Create(const chorus_transport_create_args* args, Endpoint** out) {
  return chorus::sdk::Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "ofi create: out is NULL");
    *out = nullptr;
    const auto& a = chorus::sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_transport_create_args, num_options), "ofi create");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "ofi create: rank ", a.rank, " of size ", a.size,
           " is not a rank");
    }
    if (a.timeout_ms < 0) {
      Fail(CHORUS_INVALID_ARGUMENT, "ofi create: timeout_ms ", a.timeout_ms, " is negative");
    }
    *out = Endpoint::Create(a).release();
  });
}

void Destroy(Endpoint* endpoint) { delete endpoint; }

chorus_status Start(Endpoint* endpoint, const chorus_p2p_args* args, chorus_request** request,
                    chorus_request::Kind kind) {
  const char* what = kind == chorus_request::Kind::kSend ? "ofi isend" : "ofi irecv";
  return chorus::sdk::Guard([&] {
    if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": request is NULL");
    *request = nullptr;
    if (endpoint == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": endpoint is NULL");
    const auto& a =
        chorus::sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_p2p_args, bytes), what);
    *request = endpoint->Start(kind, a);
  });
}

chorus_status Isend(Endpoint* endpoint, const chorus_p2p_args* args, chorus_request** request) {
  return Start(endpoint, args, request, chorus_request::Kind::kSend);
}

chorus_status Irecv(Endpoint* endpoint, const chorus_p2p_args* args, chorus_request** request) {
  return Start(endpoint, args, request, chorus_request::Kind::kReceive);
}

void Abort(Endpoint* endpoint) {
  if (endpoint != nullptr) endpoint->Abort();
}

// A request whose endpoint was destroyed keeps its final state.
chorus_status Finished(const chorus_request& request) {
  return request.status == CHORUS_OK ? CHORUS_OK
                                     : chorus::sdk::SetError(request.status, request.message);
}

chorus_status RequestTest(chorus_request* request, int* done) {
  if (request == nullptr || done == nullptr) {
    return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "ofi request_test: a NULL argument");
  }
  if (request->endpoint == nullptr) {
    *done = 1;
    return Finished(*request);
  }
  return request->endpoint->Test(*request, done);
}

chorus_status RequestWait(chorus_request* request, int64_t timeout_ms) {
  if (request == nullptr) {
    return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "ofi request_wait: request is NULL");
  }
  if (request->endpoint == nullptr) return Finished(*request);
  return request->endpoint->Wait(*request, timeout_ms);
}

void RequestFree(chorus_request* request) {
  if (request == nullptr) return;
  if (request->endpoint == nullptr) {
    delete request;
    return;
  }
  request->endpoint->Free(request);
}

// AUTO may pick ring@ofi over the core's tcp (10): libfabric reaches fabrics (verbs, efa, psm)
// the core's sockets cannot, and its tcp;ofi_rxm is no slower than them on Ethernet. RING asks
// for tf.distribute's ring over gRPC-style sockets, which the core's tcp transport is; NCCL
// asks for GPUs: this transport is neither, so 0 for both.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 20 : 0;
}

const chorus_capabilities kCapabilities = chorus::sdk::Capabilities(
    chorus::sdk::kHostMemory, CHORUS_SHAPE_ANY, chorus::sdk::kAllCollectiveOps, Score);

const chorus_transport_api kTransport = [] {
  chorus_transport_api t{};
  t.struct_size = sizeof(t);
  t.name = "ofi";
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
      "ofi", "1.0.0",
      "point-to-point transport over libfabric (tcp;ofi_rxm, shm, verbs, efa, ...)");
  t.request_test = RequestTest;
  t.request_wait = RequestWait;
  t.request_free = RequestFree;
  t.transport = &kTransport;
  return t;
}();

}  // namespace

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &kPlugin;
}
