// The host's composition services (plugin.h chorus_host_collectives): a plugin's communicator
// asks the core for communicators of other collectives (by name, or AUTO by scores for the
// sub-job's shape) and runs operations on them. Each is a core Communicator over a prefix of the
// asking plugin's store, so requests, time-outs, MEAN and lost peers work as for any collective;
// the signature check is left to the asking plugin's own communicator.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <strings.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <memory>
#include <string>
#include <vector>

#include "base/logging.h"
#include "collective/current_registry.h"
#include "rendezvous/c_kv_store_view.h"
#include "runtime/host.h"

struct chorus_host_communicator {
  std::unique_ptr<chorus::Communicator> communicator;
  std::string name;
};

namespace chorus::internal {
namespace {

// The message of the last failed call of this thread into these services.
std::string& LastErrorText() {
  static thread_local std::string text;
  return text;
}

template <typename Body>
chorus_status Run(Body&& body) {
  try {
    body();
    return CHORUS_OK;
  } catch (const Error& e) {
    LastErrorText() = e.what();
    return e.status();
  } catch (const std::bad_alloc&) {
    LastErrorText() = "out of memory";
    return CHORUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    LastErrorText() = std::string("internal error: ") + e.what();
    return CHORUS_INTERNAL;
  } catch (...) {
    LastErrorText() = "internal error: unknown exception";
    return CHORUS_INTERNAL;
  }
}

const std::string& AskingPlugin(void* ctx) {
  static const std::string unknown = "a plugin";
  return ctx == nullptr ? unknown : static_cast<const PluginHost*>(ctx)->plugin_name();
}

chorus_host_communicator& Require(chorus_host_communicator* comm, const char* what) {
  if (comm == nullptr || !comm->communicator) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                std::string("host collectives ") + what + ": the communicator is NULL");
  }
  return *comm;
}

chorus_status Create(void* ctx, const chorus_host_communicator_create_args* args,
                     chorus_host_communicator** out) {
  return Run([&] {
    if (out == nullptr)
      throw Error(CHORUS_INVALID_ARGUMENT, "host collectives create: out is NULL");
    *out = nullptr;
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_host_communicator_create_args, host_id),
                         "host collectives create");
    if (a.store == nullptr) {
      throw Error(CHORUS_INVALID_ARGUMENT, "host collectives create: the store is NULL");
    }
    if (a.num_options > 0 && a.options == nullptr) {
      throw Error(CHORUS_INVALID_ARGUMENT, "host collectives create: options are NULL");
    }
    if (a.timeout_ms <= 0) {
      throw Error(CHORUS_INVALID_ARGUMENT, "host collectives create: timeout_ms is " +
                                               std::to_string(a.timeout_ms) +
                                               "; give the communicator's positive time-out");
    }
    const std::string& asking = AskingPlugin(ctx);
    JobShape shape;
    shape.ranks = a.size;
    shape.hosts = a.hosts > 0 ? a.hosts : 1;
    shape.ranks_per_host = a.ranks_per_host;
    const std::string wanted = a.collective != nullptr ? a.collective : "";
    const Registry& registry = Registry::Global();
    const CollectivePlan plan = wanted.empty() || wanted == "AUTO"
                                    ? PlanByScores(registry, shape, CHORUS_REQUEST_AUTO, asking)
                                    : PlanNamed(registry, wanted, shape);
    CommunicatorConfig config;
    config.rank = a.rank;
    config.size = a.size;
    config.store = WithPrefix(ViewOfCStore(a.store), a.store_prefix ? a.store_prefix : "");
    config.name = "composed";
    config.timeout_seconds = static_cast<double>(a.timeout_ms) / 1000.0;
    for (size_t i = 0; i < a.num_options; ++i) {
      config.options.emplace_back(a.options[i].key ? a.options[i].key : "",
                                  a.options[i].value ? a.options[i].value : "");
    }
    config.address = a.address != nullptr ? a.address : "";
    config.host_id = a.host_id != nullptr ? a.host_id : "";
    config.check_signatures = false;  // the asking plugin's communicator checked the operation
    // The asking plugin derives these from its own options, whose values the parent communicator
    // compared where they must agree; some name each rank's own place (an address).
    for (const auto& [key, value] : config.options) config.per_rank_options.push_back(key);
    auto comm = std::make_unique<chorus_host_communicator>();
    comm->communicator = Communicator::Create(registry, plan, config);
    comm->name = plan.collectives.front();
    Log().debug("{} composes {} for rank {} of {} ({}; {})", asking, comm->name, a.rank, a.size,
                shape.Describe(), plan.source);
    *out = comm.release();
  });
}

void Destroy(void*, chorus_host_communicator* comm) { delete comm; }

const char* Name(void*, chorus_host_communicator* comm) {
  return comm == nullptr ? "" : comm->name.c_str();
}

chorus_status AllReduce(void*, chorus_host_communicator* comm, const chorus_all_reduce_args* args) {
  return Run([&] {
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_reduce_args, op),
                                     "host collectives all_reduce");
    Require(comm, "all_reduce").communicator->AllReduce(a.send, a.recv, a.count, a.dtype, a.op);
  });
}

chorus_status Broadcast(void*, chorus_host_communicator* comm,
                        const chorus_collective_broadcast_args* args) {
  return Run([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_collective_broadcast_args, root),
                         "host collectives broadcast");
    Require(comm, "broadcast").communicator->Broadcast(a.data, a.count, a.dtype, a.root);
  });
}

chorus_status AllGather(void*, chorus_host_communicator* comm,
                        const chorus_collective_all_gather_args* args) {
  return Run([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_collective_all_gather_args, dtype),
                         "host collectives all_gather");
    Require(comm, "all_gather").communicator->AllGather(a.send, a.recv, a.count, a.dtype);
  });
}

chorus_status ReduceScatter(void*, chorus_host_communicator* comm,
                            const chorus_reduce_scatter_args* args) {
  return Run([&] {
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_scatter_args, op),
                                     "host collectives reduce_scatter");
    Require(comm, "reduce_scatter")
        .communicator->ReduceScatter(a.send, a.recv, a.recv_count, a.dtype, a.op);
  });
}

chorus_status Barrier(void*, chorus_host_communicator* comm) {
  return Run([&] { Require(comm, "barrier").communicator->Barrier(); });
}

void Abort(void*, chorus_host_communicator* comm) {
  if (comm == nullptr || !comm->communicator) return;
  try {
    comm->communicator->Abort(CHORUS_ABORTED, "the communicator that composes it was aborted");
  } catch (...) {
    // abort() crosses the C ABI and has no status: the flag is raised before anything can throw.
  }
}

// The plugins whose score function is running on this thread: a composing plugin's score asks
// for the best of the others, whose scores may ask again; leaving every asker out ends that.
std::vector<std::string>& AskersRunning() {
  static thread_local std::vector<std::string> askers;
  return askers;
}

chorus_status BestScore(void* ctx, const chorus_score_args* args, uint32_t* score,
                        const char** name) {
  return Run([&] {
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_score_args, request),
                                     "host collectives best_score");
    if (score == nullptr || name == nullptr) {
      throw Error(CHORUS_INVALID_ARGUMENT, "host collectives best_score: score or name is NULL");
    }
    *score = 0;
    *name = "";
    auto& askers = AskersRunning();
    askers.push_back(AskingPlugin(ctx));
    struct Pop {
      std::vector<std::string>& askers;
      ~Pop() { askers.pop_back(); }
    } pop{askers};
    for (const auto& entry : CurrentRegistry().collectives()) {
      if (std::find(askers.begin(), askers.end(), entry.plugin->name()) != askers.end()) continue;
      const uint32_t value = ScoreValue(entry.api->capabilities, a);
      if (value > *score) {
        *score = value;
        *name = entry.api->name;  // static, the plugin's table (its copy lives with the plugin)
      }
    }
  });
}

const char* LastError(void*) { return LastErrorText().c_str(); }

const chorus_host_collectives* Table() {
  static const chorus_host_collectives table = [] {
    chorus_host_collectives t{};
    t.struct_size = sizeof(t);
    t.create = Create;
    t.destroy = Destroy;
    t.name = Name;
    t.all_reduce = AllReduce;
    t.broadcast = Broadcast;
    t.all_gather = AllGather;
    t.reduce_scatter = ReduceScatter;
    t.barrier = Barrier;
    t.abort = Abort;
    t.best_score = BestScore;
    t.last_error = LastError;
    return t;
  }();
  return &table;
}

// Registered when libchorus loads (runtime/host.h says why).
[[maybe_unused]] const bool g_registered = (RegisterHostCollectives(Table()), true);

}  // namespace
}  // namespace chorus::internal
