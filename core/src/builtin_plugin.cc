#include "builtin_plugin.h"

#include <chorus/plugin_sdk.hpp>

namespace chorus::internal {
namespace {

chorus_status Init(const chorus_host*) { return CHORUS_OK; }
void Shutdown() {}
const char* LastError() { return sdk::LastError(); }

// The builtin backends complete every operation before returning, so no request exists.
chorus_status RequestTest(chorus_request*, int* done) {
  if (done != nullptr) *done = 1;
  return sdk::SetError(CHORUS_INVALID_ARGUMENT, "core: this plugin never creates requests");
}
chorus_status RequestWait(chorus_request*, int64_t) {
  return sdk::SetError(CHORUS_INVALID_ARGUMENT, "core: this plugin never creates requests");
}
void RequestFree(chorus_request*) {}

}  // namespace

const chorus_plugin* BuiltinPluginTable() {
  static const chorus_plugin table = [] {
    chorus_plugin t{};
    t.struct_size = sizeof(chorus_plugin);
    t.abi_major = CHORUS_ABI_MAJOR;
    t.abi_minor = CHORUS_ABI_MINOR;
    t.name = "core";
    t.version = "1.0.0";
    t.description = "chorus's builtin cpu devices and ReductionToOneDevice";
    t.init = Init;
    t.shutdown = Shutdown;
    t.last_error = LastError;
    t.request_test = RequestTest;
    t.request_wait = RequestWait;
    t.request_free = RequestFree;
    t.device_enumerator = CpuDeviceEnumeratorTable();
    t.cross_device_ops = ReductionToOneDeviceTable();
    return t;
  }();
  return &table;
}

}  // namespace chorus::internal
