// The transports (plugin.h interface 5) the registry's plugins provide, found by name: the core's
// "tcp" and any plugin's ("ucx", "ofi", ...). chorus-bench --transports measures them.
#ifndef CHORUS_TOOLS_BENCH_TRANSPORT_LOOKUP_H_
#define CHORUS_TOOLS_BENCH_TRANSPORT_LOOKUP_H_

#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>
#include <chorus/runtime/registry.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus::bench {

struct TransportChoice {
  std::shared_ptr<PluginLibrary> plugin;
  const chorus_transport_api* api = nullptr;
};

// Every transport name of the registry, in plugin order (builtin first), each once.
std::vector<std::string> TransportNames(const Registry& registry);

// The first transport called `name` (plugin order, as the registry resolves collectives). Throws
// std::invalid_argument listing the transports available when there is none.
TransportChoice FindTransport(const Registry& registry, const std::string& name);

// Throws std::invalid_argument for the first name FindTransport does not know, and for an empty
// list or a name given twice.
void CheckTransportNames(const Registry& registry, const std::vector<std::string>& names);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_TRANSPORT_LOOKUP_H_
