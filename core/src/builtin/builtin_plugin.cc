#include "builtin/builtin_plugin.h"

#include <chorus/plugin_sdk.hpp>

#include "builtin/core_request.h"
#include "builtin/ring_algorithm.h"
#include "builtin/tcp_transport.h"

namespace chorus::internal {
namespace {

chorus_status Init(const chorus_host*) { return CHORUS_OK; }
void Shutdown() {}
const char* LastError() { return sdk::LastError(); }

// What every builtin table shares: the ABI version, the life cycle and the core's requests.
chorus_plugin BuiltinTable(const char* name, const char* description) {
  chorus_plugin t{};
  t.struct_size = sizeof(chorus_plugin);
  t.abi_major = CHORUS_ABI_MAJOR;
  t.abi_minor = CHORUS_ABI_MINOR;
  t.name = name;
  t.version = "1.0.0";
  t.description = description;
  t.init = Init;
  t.shutdown = Shutdown;
  t.last_error = LastError;
  // Requests come from the tcp transport; the other builtins complete before returning.
  t.request_test = CoreRequestTest;
  t.request_wait = CoreRequestWait;
  t.request_free = CoreRequestFree;
  return t;
}

}  // namespace

const chorus_plugin* BuiltinPluginTable() {
  static const chorus_plugin table = [] {
    chorus_plugin t = BuiltinTable(
        "core",
        "chorus's builtin cpu devices, ReductionToOneDevice, tcp transport, ring algorithm "
        "and core_ring collective");
    t.device_enumerator = CpuDeviceEnumeratorTable();
    t.cross_device_ops = ReductionToOneDeviceTable();
    t.algorithm = RingAlgorithmTable();
    t.transport = TcpTransportTable();
    return t;
  }();
  return &table;
}

}  // namespace chorus::internal
