// The exported entry point and the plugin's tables: thin C wrappers that check the handle,
// run the C++ implementation under sdk::Guard and complete every operation before returning.
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <memory>

#include "cross_device_ops.h"
#include "hierarchical_collective.h"

struct chorus_cross_device_ops {
  explicit chorus_cross_device_ops(const chorus_cross_device_ops_create_args& args) : impl(args) {}
  chorus::hierarchical::HierarchicalCopy impl;
};

namespace chorus::hierarchical {
namespace {

using sdk::Fail;
using sdk::Guard;

const HierarchicalCopy& Ops(const chorus_cross_device_ops* ops, const char* what) {
  if (ops == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy ", what, ": ops is NULL");
  return ops->impl;
}

// This plugin finishes every operation before returning, so *request is always NULL.
void NoRequest(chorus_request** request, const char* what) {
  if (request == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy ", what, ": request is NULL");
  }
  *request = nullptr;
}

chorus_status Create(const chorus_cross_device_ops_create_args* args,
                     chorus_cross_device_ops** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: out is NULL");
    *out = nullptr;
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_cross_device_ops_create_args, num_options),
                         "hierarchical_copy create");
    *out = std::make_unique<chorus_cross_device_ops>(a).release();
  });
}

void Destroy(chorus_cross_device_ops* ops) { delete ops; }

chorus_status Reduce(chorus_cross_device_ops* ops, const chorus_reduce_args* args,
                     chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "reduce");
    Ops(ops, "reduce").Reduce(args);
  });
}

chorus_status BatchReduce(chorus_cross_device_ops* ops, const chorus_batch_reduce_args* args,
                          chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "batch_reduce");
    Ops(ops, "batch_reduce").BatchReduce(args);
  });
}

chorus_status Broadcast(chorus_cross_device_ops* ops, const chorus_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "broadcast");
    Ops(ops, "broadcast").Broadcast(args);
  });
}

chorus_status AllGather(chorus_cross_device_ops* ops, const chorus_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "all_gather");
    Ops(ops, "all_gather").AllGather(args);
  });
}

chorus_status RequestTest(chorus_request* request, int* done) {
  return Guard([&] {
    if (done != nullptr) *done = 1;
    Fail(CHORUS_INVALID_ARGUMENT, "hierarchical request_test: request ",
         static_cast<const void*>(request),
         " is not this plugin's (it completes every operation before returning and never "
         "creates requests)");
  });
}

chorus_status RequestWait(chorus_request* request, int64_t /*timeout_ms*/) {
  return Guard([&] {
    Fail(CHORUS_INVALID_ARGUMENT, "hierarchical request_wait: request ",
         static_cast<const void*>(request),
         " is not this plugin's (it completes every operation before returning and never "
         "creates requests)");
  });
}

// HierarchicalCopyAllReduce moves every byte through the first device of each group; on one
// memory system it measured 2-8x slower than reduction_to_one_device (README, Benchmarks), so
// AUTO keeps it below the reference and CHORUS_CROSS_DEVICE_OPS=hierarchical_copy chooses it.
uint32_t CopyScore(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 3 : 0;
}
const chorus_capabilities kCopyCapabilities =
    sdk::Capabilities(sdk::kAnyMemory, CHORUS_SHAPE_ANY, sdk::kAllCrossDeviceOps, CopyScore);

const chorus_cross_device_ops_api kCrossDeviceOps = [] {
  chorus_cross_device_ops_api t{};
  t.struct_size = sizeof(t);
  t.name = "hierarchical_copy";
  t.create = Create;
  t.destroy = Destroy;
  t.reduce = Reduce;
  t.batch_reduce = BatchReduce;
  t.broadcast = Broadcast;
  t.all_gather = AllGather;
  t.capabilities = &kCopyCapabilities;
  return t;
}();

const chorus_plugin kPlugin = [] {
  chorus_plugin t = sdk::PluginTable(
      "hierarchical", "1.1.0",
      "HierarchicalCopyAllReduce (tf.distribute) over any device enumerator, with num_packs; the "
      "hierarchical collective: one collective within each host, another across (local+cross)");
  t.request_test = RequestTest;
  t.request_wait = RequestWait;
  t.cross_device_ops = &kCrossDeviceOps;
  t.collective = HierarchicalCollectiveTable();
  return t;
}();

}  // namespace
}  // namespace chorus::hierarchical

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(
    const chorus_host* /*host*/) {
  return &chorus::hierarchical::kPlugin;
}
