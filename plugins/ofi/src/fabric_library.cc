#include "fabric_library.h"

#include <dlfcn.h>

#include <chorus/plugin_sdk.hpp>
#include <string>

namespace chorus::ofi {
namespace {

// CMake passes the library's soname and each function's default symbol version; a build without
// them (another build system) takes the library's default versions, which match its headers.
#ifndef CHORUS_OFI_LIBFABRIC_SONAME
#define CHORUS_OFI_LIBFABRIC_SONAME "libfabric.so.1"
#endif

template <typename Function>
Function Lookup(void* library, const char* name, const char* version, std::string* missing) {
  void* symbol = version[0] == '\0' ? dlsym(library, name) : dlvsym(library, name, version);
  if (symbol == nullptr) {
    *missing += std::string(missing->empty() ? "" : ", ") + name +
                (version[0] == '\0' ? "" : std::string("@") + version);
  }
  return reinterpret_cast<Function>(symbol);
}

#define CHORUS_OFI_LOOKUP(field, name, version) \
  library.field = Lookup<decltype(library.field)>(handle, #name, version, &missing)

#ifndef CHORUS_OFI_VERSION_fi_getinfo
#define CHORUS_OFI_VERSION_fi_getinfo ""
#define CHORUS_OFI_VERSION_fi_freeinfo ""
#define CHORUS_OFI_VERSION_fi_dupinfo ""
#define CHORUS_OFI_VERSION_fi_fabric ""
#define CHORUS_OFI_VERSION_fi_strerror ""
#endif

struct Loaded {
  FabricLibrary library{};
  std::string error;  // empty when loaded
};

Loaded Load() {
  Loaded loaded;
  const char* soname = CHORUS_OFI_LIBFABRIC_SONAME;
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = dlerror();
    loaded.error = std::string("ofi: cannot load ") + soname + " (" + (why ? why : "no reason") +
                   "); install libfabric (Debian: apt-get install libfabric1)";
    return loaded;
  }
  FabricLibrary& library = loaded.library;
  std::string missing;
  CHORUS_OFI_LOOKUP(getinfo, fi_getinfo, CHORUS_OFI_VERSION_fi_getinfo);
  CHORUS_OFI_LOOKUP(freeinfo, fi_freeinfo, CHORUS_OFI_VERSION_fi_freeinfo);
  CHORUS_OFI_LOOKUP(dupinfo, fi_dupinfo, CHORUS_OFI_VERSION_fi_dupinfo);
  CHORUS_OFI_LOOKUP(fabric, fi_fabric, CHORUS_OFI_VERSION_fi_fabric);
  CHORUS_OFI_LOOKUP(strerror, fi_strerror, CHORUS_OFI_VERSION_fi_strerror);
  if (!missing.empty()) {
    loaded.error = std::string("ofi: ") + soname + " lacks " + missing +
                   ": it is older than the libfabric the plugin was built against; install that "
                   "libfabric or rebuild the plugin against this one";
  }
  return loaded;
}

}  // namespace

const FabricLibrary& Fabric() {
  static const Loaded loaded = Load();  // thread-safe, once per process
  if (!loaded.error.empty()) sdk::Fail(CHORUS_UNAVAILABLE, loaded.error);
  return loaded.library;
}

}  // namespace chorus::ofi
