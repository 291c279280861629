// The "ofi" plugin's table: one transport, "ofi", over libfabric (plugin.h interface 5).
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <exception>
#include <string>

#include "ofi_endpoint.h"
#include "provider.h"
#include "provider_score.h"

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

// The provider the endpoints of this process use, found once: FI_PROVIDER, else tcp;ofi_rxm
// (ChooseProvider; the option provider, which the score cannot see, overrides it at create).
// `usable` false: libfabric or the provider is missing, and create would fail.
struct ProcessProvider {
  std::string name;
  bool usable = true;
};

ProcessProvider FindProcessProvider() {
  const std::string named = chorus::ofi::ChooseProvider("");
  // Over sockets whatever libfabric finds: known without loading libfabric, which costs every
  // process that asks for a score ~0.4 s (fabric_library.h).
  if (chorus::ofi::SocketsOnly(named)) return {named, true};
  try {
    const chorus::ofi::InfoPtr info = chorus::ofi::FindProvider(named, "");
    const char* found = info->fabric_attr != nullptr ? info->fabric_attr->prov_name : nullptr;
    return {found != nullptr ? found : named, true};
  } catch (const std::exception& e) {  // sdk::Error from Fabric() and FindProvider
    chorus::sdk::Log(CHORUS_LOG_DEBUG,
                     std::string("ofi: the transport scores 0 for AUTO: ") + e.what());
    return {named, false};
  }
}

// AUTO: the provider's path (provider_score.h), found once per process: over sockets (tcp;ofi_rxm,
// the default) 8, below the core's tcp (10), which carries the same bytes through fewer layers;
// shm 30 on one host (0 across hosts, which it cannot reach); verbs, efa, psm2/3, cxi, opx, ucx
// 40, fabrics the core's sockets cannot use. 0 when libfabric or the provider FI_PROVIDER names
// is missing. RING asks for tf.distribute's ring over gRPC-style sockets, which the core's tcp
// transport is; NCCL asks for GPUs: this transport is neither, so 0 for both.
uint32_t Score(const chorus_score_args* args) {
  if (args == nullptr || args->request != CHORUS_REQUEST_AUTO) return 0;
  static const ProcessProvider provider = FindProcessProvider();
  return provider.usable ? chorus::ofi::ScoreOfProvider(provider.name, *args) : 0;
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
