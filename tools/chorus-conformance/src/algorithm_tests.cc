// Algorithm checks (plugin.h interface 4), for every algorithm the plugin provides, run through
// chorus::RunAlgorithm over the core's tcp transport and over every transport of the plugin given
// with --transport. Every operation in supported_ops: all_reduce in and out of place, broadcast
// from every root, all_gather (out of place and in place), reduce_scatter, barrier; every dtype,
// every plugin reduce op, counts {0, 1, odd, large: more than 64 KiB in each rank's chunk};
// against the kit's reference; with 1, 2, 3, 4, 5 and 8 ranks as threads, or one rank per
// process over the job's store.
#include <chorus/base/error.h>
#include <chorus/collective/transport_endpoint.h>

#include <string>
#include <vector>

#include "endpoint_ranks.h"
#include "suite.h"
#include "sweep.h"

namespace chorus::conformance::internal {
namespace {

constexpr int kAlgorithmRankCounts[] = {1, 2, 3, 4, 5, 8};
constexpr size_t kChunkBytes = 64 * 1024;
constexpr int kBarriers = 3;

// {0, 1, odd, large} for `op` on `ranks` ranks: large puts kChunkBytes and 3 more elements in
// each rank's chunk (all_reduce and broadcast split count among the ranks; all_gather and
// reduce_scatter count per rank).
CountsOf Counts(chorus_collective_op op, int ranks) {
  return [op, ranks](chorus_dtype dtype) {
    const size_t per_chunk = kChunkBytes / chorus_dtype_size(dtype) + 3;
    const bool split = op == CHORUS_OP_ALL_REDUCE || op == CHORUS_OP_BROADCAST;
    return std::vector<size_t>{0, 1, kOddCount,
                               split ? per_chunk * static_cast<size_t>(ranks) : per_chunk};
  };
}

// One case through RunAlgorithm, checked against the reference.
std::string RunCase(const Suite& suite, const chorus_algorithm_api& algorithm, EndpointRank& me,
                    const OpCase& c) {
  CaseBuffers buffers(c, me.rank, me.size);
  chorus_algorithm_run_args args{};
  args.op = c.op;
  args.send = buffers.send();
  args.recv = buffers.recv();
  args.count = c.count;
  args.dtype = c.dtype;
  args.op_reduce = c.reduce;
  args.root = c.root;
  args.timeout_ms = suite.timeout_ms();
  try {
    RunAlgorithm(suite.plugin(), algorithm, *me.endpoint, args);
  } catch (const Error& e) {
    if (IsNotHere(e.status())) {
      return NotHereOnRank(suite, e.status(), Declares(algorithm, c.op), Describe(c), e.what());
    }
    return Describe(c) + ": " + StatusName(e.status()) + ": " + e.what() +
           "; run must return CHORUS_OK for every op in supported_ops with valid arguments";
  }
  return buffers.Check();
}

// Three barriers; no rank may leave one before every rank has entered it (counted in the
// group's store).
std::string AlgorithmBarrierBody(const Suite& suite, const chorus_algorithm_api& algorithm,
                                 EndpointRank& me) {
  OpCase barrier;
  barrier.op = CHORUS_OP_BARRIER;
  for (int round = 0; round < kBarriers; ++round) {
    const std::string key = "arrived/" + std::to_string(round);
    me.sync->Add(key, 1);
    if (std::string failure = RunCase(suite, algorithm, me, barrier); !failure.empty()) {
      return failure;
    }
    const int64_t arrived = me.sync->Add(key, 0);
    if (arrived < me.size) {
      return "barrier " + std::to_string(round) + " returned when " + std::to_string(arrived) +
             " of " + std::to_string(me.size) +
             " ranks had entered it; a barrier may return only after every rank has entered it";
    }
  }
  return "";
}

struct Operation {
  chorus_collective_op op;
  const char* test;
  std::vector<bool> placements;
};

const Operation kOperations[] = {
    {CHORUS_OP_ALL_REDUCE, "AllReduceInAndOutOfPlace", {false, true}},
    {CHORUS_OP_BROADCAST, "BroadcastFromEveryRoot", {false}},
    {CHORUS_OP_ALL_GATHER, "AllGatherInAndOutOfPlace", {false, true}},
    {CHORUS_OP_REDUCE_SCATTER, "ReduceScatter", {false}},
    {CHORUS_OP_BARRIER, "Barrier", {false}},
};

// Algorithm.<operation>/<algorithm>_over_<transport>.
void AddAlgorithmTest(const SuitePtr& suite, const chorus_algorithm_api& algorithm,
                      const std::shared_ptr<PluginLibrary>& transport_plugin,
                      const chorus_transport_api& transport, const Operation& operation) {
  const std::string name =
      std::string(operation.test) + "/" + algorithm.name + "_over_" + transport.name;
  AddTest("Algorithm", name, [suite, &algorithm, transport_plugin, &transport, operation] {
    std::vector<int> sizes(std::begin(kAlgorithmRankCounts), std::end(kAlgorithmRankCounts));
    if (suite->job_mode()) sizes = {suite->options().job_size};
    for (int size : sizes) {
      SCOPED_TRACE(std::to_string(size) + " ranks");
      const auto body = [&](EndpointRank& me) -> std::string {
        if (operation.op == CHORUS_OP_BARRIER) return AlgorithmBarrierBody(*suite, algorithm, me);
        for (const OpCase& c :
             Cases(operation.op, size, Counts(operation.op, size), operation.placements)) {
          if (std::string failure = RunCase(*suite, algorithm, me, c); !failure.empty()) {
            me.endpoint->Abort();  // so the other ranks fail at once instead of timing out
            return failure;
          }
        }
        return "";
      };
      const std::string context = std::string("algorithm '") + algorithm.name +
                                  "' over transport '" + transport.name + "' with " +
                                  std::to_string(size) + " ranks";
      if (Report(RunEndpointRanks(*suite, transport_plugin, transport, size, body), context)) {
        return;
      }
    }
  });
}

}  // namespace

void RegisterAlgorithmTests(const SuitePtr& suite) {
  // The transports the algorithms run over: the core's, then those given with --transport.
  std::vector<std::pair<std::shared_ptr<PluginLibrary>, const chorus_transport_api*>> transports;
  for (const chorus_transport_api* t : suite->core()->transports()) {
    transports.emplace_back(suite->core(), t);
  }
  if (const auto& extra = suite->options().transport_plugin) {
    for (const chorus_transport_api* t : extra->transports()) transports.emplace_back(extra, t);
  }
  for (const chorus_algorithm_api* algorithm : suite->plugin().algorithms()) {
    for (const auto& [plugin, transport] : transports) {
      for (const Operation& operation : kOperations) {
        if (Declares(*algorithm, operation.op)) {
          AddAlgorithmTest(suite, *algorithm, plugin, *transport, operation);
        }
      }
    }
  }
}

}  // namespace chorus::conformance::internal
