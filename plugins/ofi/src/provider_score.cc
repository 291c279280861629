#include "provider_score.h"

#include <algorithm>
#include <cstddef>
#include <iterator>

namespace chorus::ofi {
namespace {

// libfabric's core providers over the kernel's sockets, and its utility providers that layer
// over a core one (rxm: reliable datagrams over connections; rxd: over datagrams).
constexpr std::string_view kSocketProviders[] = {"tcp", "sockets", "udp",
                                                 "net", "ofi_rxm", "ofi_rxd"};
constexpr std::string_view kSharedMemoryProviders[] = {"shm", "sm2"};
constexpr std::string_view kFabricProviders[] = {"verbs", "efa", "psm2", "psm3",
                                                 "cxi",   "opx", "ucx",  "psm"};

template <size_t N>
bool OneOf(std::string_view name, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

}  // namespace

ProviderPath PathOfProvider(std::string_view name) {
  const std::string_view core = name.substr(0, name.find(';'));
  if (OneOf(core, kSharedMemoryProviders)) return ProviderPath::kSharedMemory;
  if (OneOf(core, kFabricProviders)) return ProviderPath::kFabric;
  return ProviderPath::kSockets;
}

bool SocketsOnly(std::string_view name) {
  if (name.empty()) return false;
  while (!name.empty()) {
    const size_t end = std::min(name.find_first_of(";,"), name.size());
    if (!OneOf(name.substr(0, end), kSocketProviders)) return false;
    name.remove_prefix(std::min(end + 1, name.size()));
  }
  return true;
}

uint32_t ScoreOfProvider(std::string_view name, const chorus_score_args& args) {
  if (args.request != CHORUS_REQUEST_AUTO) return 0;
  switch (PathOfProvider(name)) {
    case ProviderPath::kSharedMemory:
      return args.hosts == 1 ? 30 : 0;
    case ProviderPath::kFabric:
      return 40;
    case ProviderPath::kSockets:
      break;
  }
  return 8;
}

}  // namespace chorus::ofi
