// One fake plugin, built as many variants (Vulkan-Loader style). Each FAKE_* macro set by
// tests/loader/CMakeLists.txt turns it into one kind of broken or unusual plugin.
#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#ifndef FAKE_NAME
#error "FAKE_NAME must be defined"
#endif
#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR CHORUS_ABI_MAJOR
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR CHORUS_ABI_MINOR
#endif

namespace {

const char* g_error = "";

chorus_status Init(const chorus_host*) {
#ifdef FAKE_INIT_FAILS
  g_error = "no fake device on this machine";
  return CHORUS_UNAVAILABLE;
#else
  return CHORUS_OK;
#endif
}
void Shutdown() {}
const char* LastError() { return g_error; }
chorus_status RequestTest(chorus_request*, int* done) {
  *done = 1;
  return CHORUS_OK;
}
chorus_status RequestWait(chorus_request*, int64_t) { return CHORUS_OK; }
void RequestFree(chorus_request*) {}

// A cross-device ops whose every operation succeeds without touching memory: the loader tests
// only need something to create and hold.
chorus_status OpsCreate(const chorus_cross_device_ops_create_args*, chorus_cross_device_ops** out) {
  static int token;
  *out = reinterpret_cast<chorus_cross_device_ops*>(&token);
  return CHORUS_OK;
}
void OpsDestroy(chorus_cross_device_ops*) {}
chorus_status OpsReduce(chorus_cross_device_ops*, const chorus_reduce_args*,
                        chorus_request** request) {
  *request = nullptr;
  return CHORUS_OK;
}

const chorus_cross_device_ops_api kOps = {sizeof(chorus_cross_device_ops_api),
                                          FAKE_NAME "_ops",
                                          OpsCreate,
                                          OpsDestroy,
                                          OpsReduce,
                                          nullptr,
                                          nullptr,
                                          nullptr};

// A plugin table as a later minor version would have it: the 1.0 fields, then one more.
struct NewerTable {
  chorus_plugin base;
  void (*future_slot)(void);
};

// Poison behind a truncated table: the core must not read past struct_size.
const chorus_collective_api* const kPoison =
    reinterpret_cast<const chorus_collective_api*>(static_cast<uintptr_t>(0xdeadbeef));

const NewerTable kTable = {{
#if defined(FAKE_TINY_TABLE)
                               8,
#elif defined(FAKE_OLDER_MINOR)
                                // Built against a header that ended before the collective slot.
                                offsetof(chorus_plugin, collective),
#elif defined(FAKE_NEWER_MINOR)
                                sizeof(NewerTable),
#else
                                sizeof(chorus_plugin),
#endif
                               FAKE_ABI_MAJOR,
                               FAKE_ABI_MINOR,
                               FAKE_NAME,
                               "0.0.1",
                               "fake plugin for the loader tests",
#ifdef FAKE_NULL_INIT
                               nullptr,
#else
                                Init,
#endif
                               Shutdown,
                               LastError,
                               RequestTest,
                               RequestWait,
                               RequestFree,
                               nullptr,
                               &kOps,
#ifdef FAKE_OLDER_MINOR
                               kPoison,
                               reinterpret_cast<const chorus_algorithm_api*>(kPoison),
                               reinterpret_cast<const chorus_transport_api*>(kPoison),
#else
                                nullptr,
                                nullptr,
                                nullptr,
#endif
                           },
                           nullptr};

}  // namespace

#ifdef FAKE_NO_ENTRY
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get_misspelled(
    const chorus_host*) {
  return &kTable.base;
}
#else
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
#if defined(FAKE_ENTRY_THROWS)
  throw std::runtime_error("fake entry exploded");
#elif defined(FAKE_ENTRY_NULL)
  return nullptr;
#else
  return &kTable.base;
#endif
}
#endif
