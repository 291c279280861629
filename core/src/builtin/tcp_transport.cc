// The C table of the core's tcp transport. A chorus_transport_endpoint* is a TcpEndpoint*.
#include "builtin/tcp_transport.h"

#include <chorus/plugin_sdk.hpp>
#include <string_view>

#include "builtin/core_request.h"
#include "builtin/tcp_endpoint.h"

namespace chorus::internal {
namespace {

using sdk::Fail;
using sdk::Guard;
using sdk::RequireArgs;

TcpEndpoint& RequireEndpoint(chorus_transport_endpoint* endpoint, const char* what) {
  if (endpoint == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tcp ", what, ": endpoint is NULL");
  return *reinterpret_cast<TcpEndpoint*>(endpoint);
}

TcpEndpointOptions ParseOptions(const chorus_option* options, size_t count) {
  if (options == nullptr && count > 0) Fail(CHORUS_INVALID_ARGUMENT, "tcp: options are NULL");
  TcpEndpointOptions parsed;
  for (size_t i = 0; i < count; ++i) {
    const std::string_view key = options[i].key == nullptr ? "" : options[i].key;
    const std::string_view value = options[i].value == nullptr ? "" : options[i].value;
    if (key == "host") {
      if (value.empty()) Fail(CHORUS_INVALID_ARGUMENT, "tcp: option host is empty");
      parsed.host = std::string(value);
    } else if (key == "store_prefix") {
      parsed.store_prefix = std::string(value);
    } else {
      Fail(CHORUS_INVALID_ARGUMENT, "tcp: unknown option '", key,
           "' (known: host, the address to listen on and publish; store_prefix, put before its "
           "keys in the rendezvous store)");
    }
  }
  return parsed;
}

bool HasOption(const chorus_option* options, size_t count, std::string_view key) {
  return sdk::FindOption(options, count, key).has_value();
}

chorus_status Create(const chorus_transport_create_args* args, chorus_transport_endpoint** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tcp create: out is NULL");
    *out = nullptr;
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_transport_create_args, num_options),
                                "tcp create");
    if (a.store == nullptr || a.store->struct_size < CHORUS_STRUCT_SIZE(chorus_kv_store, remove)) {
      Fail(CHORUS_INVALID_ARGUMENT, "tcp create: the rendezvous store is NULL or too small");
    }
    TcpEndpointOptions options = ParseOptions(a.options, a.num_options);
    // Without the option, listen at the address the cluster spec gives this rank (1.1).
    if (!HasOption(a.options, a.num_options, "host") && !sdk::CreateAddress(a).empty()) {
      options.host = std::string(sdk::CreateAddress(a));
    }
    auto endpoint = TcpEndpoint::Create(a.rank, a.size, *a.store, a.timeout_ms, options);
    *out = reinterpret_cast<chorus_transport_endpoint*>(endpoint.release());
  });
}

void Destroy(chorus_transport_endpoint* endpoint) {
  delete reinterpret_cast<TcpEndpoint*>(endpoint);
}

const chorus_p2p_args& RequireP2p(const chorus_p2p_args* args, chorus_request** request,
                                  const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tcp ", what, ": request is NULL");
  *request = nullptr;
  return RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_p2p_args, bytes), what);
}

chorus_status Isend(chorus_transport_endpoint* endpoint, const chorus_p2p_args* args,
                    chorus_request** request) {
  return Guard([&] {
    const auto& a = RequireP2p(args, request, "isend");
    auto r = RequireEndpoint(endpoint, "isend").Send(a.peer, a.tag, a.data, a.bytes);
    *request = NewRequestHandle(std::move(r));
  });
}

chorus_status Irecv(chorus_transport_endpoint* endpoint, const chorus_p2p_args* args,
                    chorus_request** request) {
  return Guard([&] {
    const auto& a = RequireP2p(args, request, "irecv");
    auto r = RequireEndpoint(endpoint, "irecv").Recv(a.peer, a.tag, a.data, a.bytes);
    *request = NewRequestHandle(std::move(r));
  });
}

void Abort(chorus_transport_endpoint* endpoint) {
  if (endpoint != nullptr) reinterpret_cast<TcpEndpoint*>(endpoint)->Abort();
}

// The reference transport: it reaches any host, but every message crosses the kernel's socket
// layer twice. Under RING it carries the ring (core_ring = ring@tcp) as tf.distribute's gRPC would.
uint32_t TcpScore(const chorus_score_args* args) {
  switch (args->request) {
    case CHORUS_REQUEST_AUTO:
      return 10;
    case CHORUS_REQUEST_RING:
      return 50;
    default:
      return 0;
  }
}

}  // namespace

const chorus_transport_api* TcpTransportTable() {
  static const chorus_capabilities capabilities =
      sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps, TcpScore);
  static const chorus_transport_api table = [] {
    chorus_transport_api t{};
    t.struct_size = sizeof(t);
    t.name = kTcpTransportName;
    t.create = Create;
    t.destroy = Destroy;
    t.isend = Isend;
    t.irecv = Irecv;
    t.abort = Abort;
    t.capabilities = &capabilities;
    return t;
  }();
  return &table;
}

}  // namespace chorus::internal
