// The ofi transport's AUTO score from the libfabric provider its endpoints use: how that provider
// carries the bytes (sockets, shared memory, a fabric). Pure functions of the provider's name;
// plugin_table.cc finds the name once per process.
#ifndef CHORUS_OFI_PROVIDER_SCORE_H_
#define CHORUS_OFI_PROVIDER_SCORE_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <string_view>

namespace chorus::ofi {

enum class ProviderPath {
  kSockets,       // tcp, sockets, udp (and rxm/rxd over them): the kernel's network stack
  kSharedMemory,  // shm (sm2): this host's ranks only
  kFabric,        // verbs, efa, psm2, psm3, cxi, opx, ucx: RDMA and HPC fabrics
};

// The path of a provider by its core provider, the first of a layered name ("verbs" of
// "verbs;ofi_rxm"); an unknown name counts as sockets (general, not measured faster).
ProviderPath PathOfProvider(std::string_view name);

// Whether every provider `name` may stand for (FI_PROVIDER's ';' layers and ',' choices) goes
// over sockets, so that its score is known without asking libfabric (whose loading costs a
// process ~0.4 s: fabric_library.h).
bool SocketsOnly(std::string_view name);

// AUTO: sockets 8 (below the core's tcp, 10: libfabric's tcp;ofi_rxm carries the same loopback
// or Ethernet bytes through more layers), shared memory 30 on one host and 0 across hosts (shm
// reaches no other host), fabric 40. RING and NCCL: 0.
uint32_t ScoreOfProvider(std::string_view name, const chorus_score_args& args);

}  // namespace chorus::ofi

#endif  // CHORUS_OFI_PROVIDER_SCORE_H_
