#include "options.h"

#include <gloo/config.h>

#include <chorus/plugin_sdk.hpp>
#include <set>
#include <string_view>

namespace chorus::gloo_plugin {
namespace {

using sdk::Fail;

constexpr const char* kKeys = "algorithm, hostname, interface, transport";

Algorithm ParseAlgorithm(std::string_view value) {
  if (value == "ring") return Algorithm::kRing;
  if (value == "ring_chunked") return Algorithm::kRingChunked;
  if (value == "bcube") return Algorithm::kBcube;
  Fail(CHORUS_INVALID_ARGUMENT, "gloo: option algorithm=", value,
       " is not an algorithm of this plugin; use ring (the default), ring_chunked or bcube");
}

void CheckTransport(std::string_view value) {
  if (value == "tcp") return;
  if (value == "ibverbs") {
#if GLOO_HAVE_TRANSPORT_IBVERBS
    Fail(CHORUS_UNSUPPORTED,
         "gloo: transport=ibverbs is not supported: this Gloo has an ibverbs transport, but its "
         "ibverbs pairs lack the unbound buffers that gloo::allreduce, broadcast, allgather and "
         "barrier need (Gloo says \"Unbound buffers not supported yet for ibverbs transport\"); "
         "use transport=tcp");
#else
    Fail(CHORUS_UNSUPPORTED,
         "gloo: transport=ibverbs is not supported: this Gloo was built without its ibverbs "
         "transport; use transport=tcp");
#endif
  }
  Fail(CHORUS_INVALID_ARGUMENT, "gloo: option transport=", value,
       " is not a transport of this plugin; use tcp (the default)");
}

}  // namespace

const char* AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRingChunked:
      return "ring_chunked";
    case Algorithm::kBcube:
      return "bcube";
  }
  return "?";
}

CommunicatorOptions ParseOptions(const chorus_option* options, size_t count) {
  if (count > 0 && options == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "gloo create: num_options is ", count, " but options is NULL");
  }
  CommunicatorOptions result;
  std::set<std::string_view> seen;
  for (size_t i = 0; i < count; ++i) {
    if (options[i].key == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "gloo: options[", i, "].key is NULL");
    const std::string_view key = options[i].key;
    const std::string_view value = options[i].value == nullptr ? "" : options[i].value;
    if (!seen.insert(key).second)
      Fail(CHORUS_INVALID_ARGUMENT, "gloo: option ", key, " is given twice");
    if (key != "algorithm" && key != "hostname" && key != "interface" && key != "transport") {
      Fail(CHORUS_INVALID_ARGUMENT, "gloo: unknown option '", key, "'; the options are ", kKeys);
    }
    if (value.empty()) Fail(CHORUS_INVALID_ARGUMENT, "gloo: option ", key, " is empty");
    if (key == "algorithm") {
      result.algorithm = ParseAlgorithm(value);
    } else if (key == "hostname") {
      result.hostname = value;
    } else if (key == "interface") {
      result.interface = value;
    } else {
      CheckTransport(value);
    }
  }
  if (!result.hostname.empty() && !result.interface.empty()) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "gloo: give either option hostname or option interface, not both (hostname=",
         result.hostname, ", interface=", result.interface, ")");
  }
  return result;
}

}  // namespace chorus::gloo_plugin
