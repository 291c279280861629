#include "transport_lookup.h"

#include <algorithm>
#include <stdexcept>

#include "list_text.h"

namespace chorus::bench {

std::vector<std::string> TransportNames(const Registry& registry) {
  std::vector<std::string> names;
  for (const auto& plugin : registry.plugins()) {
    for (const chorus_transport_api* api : plugin->transports()) {
      if (std::find(names.begin(), names.end(), api->name) == names.end()) {
        names.emplace_back(api->name);
      }
    }
  }
  return names;
}

TransportChoice FindTransport(const Registry& registry, const std::string& name) {
  for (const auto& plugin : registry.plugins()) {
    for (const chorus_transport_api* api : plugin->transports()) {
      if (name == api->name) return {plugin, api};
    }
  }
  throw std::invalid_argument(
      "unknown transport '" + name +
      "'; the transports available are: " + JoinNames(TransportNames(registry)) +
      " (plugins are searched in CHORUS_PLUGIN_PATH and the install's plugin folder; chorus-info "
      "lists them)");
}

void CheckTransportNames(const Registry& registry, const std::vector<std::string>& names) {
  if (names.empty()) {
    throw std::invalid_argument("--transports needs at least one name, e.g. --transports tcp");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::find(names.begin(), names.begin() + static_cast<ptrdiff_t>(i), names[i]) !=
        names.begin() + static_cast<ptrdiff_t>(i)) {
      throw std::invalid_argument("--transports names '" + names[i] + "' twice");
    }
    FindTransport(registry, names[i]);
  }
}

}  // namespace chorus::bench
