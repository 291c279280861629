// chorus: everything a trainer uses, in one include. The layers' own headers
// (chorus/<layer>/<name>.h) may be included one by one instead.
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/cluster_resolver/cluster_spec.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/cluster_resolver/multi_worker_util.h>
#include <chorus/cluster_resolver/tpu_cluster_resolver.h>
#include <chorus/collective/algorithm_rules.h>
#include <chorus/collective/communication_options.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/collective/selection.h>
#include <chorus/collective/transport_endpoint.h>
#include <chorus/distribute/dataset.h>
#include <chorus/distribute/multi_worker_mirrored_strategy.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/strategies.h>
#include <chorus/distribute/strategy.h>
#include <chorus/distribute/tpu_strategy.h>
#include <chorus/distribute/values.h>
#include <chorus/distribute/variable.h>
#include <chorus/rendezvous/job_credential.h>
#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/rendezvous/rendezvous.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/plugin_library.h>
#include <chorus/runtime/registry.h>
#include <chorus/runtime/tensor.h>
#include <chorus/training/callbacks.h>
#include <chorus/training/checkpoint.h>
#include <chorus/training/checkpoint_manager.h>
#include <chorus/training/fit.h>
#include <chorus/training/loss.h>
#include <chorus/training/metrics.h>
#include <chorus/training/optimizer.h>

#endif  // CHORUS_CHORUS_H_
