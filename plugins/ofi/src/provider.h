// Finding a libfabric provider for the endpoint: fi_getinfo with hints for what the transport needs
// (reliable-datagram endpoints, tagged messages, send-after-send order, thread safety), and a
// clear UNAVAILABLE naming what there is when nothing matches.
#ifndef CHORUS_OFI_PROVIDER_H_
#define CHORUS_OFI_PROVIDER_H_

#include <rdma/fabric.h>

#include <memory>
#include <string>

#include "fabric_library.h"

namespace chorus::ofi {

// "No data available (-61)": fi_strerror's words for a libfabric return code.
std::string FabricError(int code);

struct InfoDeleter {
  void operator()(fi_info* info) const { Fabric().freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

// The provider to use: option "provider", else FI_PROVIDER, else "tcp;ofi_rxm". `option` is
// empty when the option was not given.
std::string ChooseProvider(const std::string& option);

// The first fi_info of `provider` that serves the transport. With a socket-address provider
// (tcp) the endpoint binds to `bind_host` (FI_SOURCE). FI_DIRECTED_RECV is asked for first, then
// left out (only left out with ask_directed false). Throws UNAVAILABLE naming fi_strerror's words,
// the providers that would serve, and what to set.
InfoPtr FindProvider(const std::string& provider, const std::string& bind_host,
                     bool ask_directed = true);

// Whether `info` grants FI_DIRECTED_RECV.
bool GrantsDirectedReceive(const fi_info& info);

// The largest message tcp;ofi_rxm sends eagerly, in one bounce buffer: FI_OFI_RXM_EAGER_LIMIT,
// else FI_OFI_RXM_BUFFER_SIZE (the eager limit follows it), else libfabric's default, 16384
// (measured with fi_pingpong: 16384 bytes went eagerly, 16448 by segmentation). 0 for any other
// provider, verbs;ofi_rxm included: what pieces gain there was never measured.
size_t RxmEagerLimit(const fi_info& info);

}  // namespace chorus::ofi

#endif  // CHORUS_OFI_PROVIDER_H_
