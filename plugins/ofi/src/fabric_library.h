// libfabric, loaded when the first endpoint is made rather than when the core loads the plugin.
// The core loads every plugin in every process, and loading libfabric runs its PSM and PSM2
// providers' library constructors, which calibrate the CPU clock for about 100 ms each: linked
// directly, the plugin cost every chorus process about 0.2 s, ofi used or not.
#ifndef CHORUS_OFI_FABRIC_LIBRARY_H_
#define CHORUS_OFI_FABRIC_LIBRARY_H_

#include <rdma/fabric.h>

namespace chorus::ofi {

// The functions libfabric exports that the plugin calls (the rest of its API is inline calls
// through the objects' operation tables). Each is looked up at the symbol version the linker
// would have bound at build time (CMake reads them from the library the plugin is built against).
struct FabricLibrary {
  decltype(&::fi_getinfo) getinfo;
  decltype(&::fi_freeinfo) freeinfo;
  decltype(&::fi_dupinfo) dupinfo;  // fi_allocinfo() is dupinfo(nullptr)
  decltype(&::fi_fabric) fabric;
  decltype(&::fi_strerror) strerror;
};

// libfabric, loaded on the first call in the process and kept until exit (RTLD_NODELETE: its
// providers keep threads and allocations). Throws UNAVAILABLE naming the library, the loader's
// words and the package to install; every later call throws the same.
const FabricLibrary& Fabric();

}  // namespace chorus::ofi

#endif  // CHORUS_OFI_FABRIC_LIBRARY_H_
