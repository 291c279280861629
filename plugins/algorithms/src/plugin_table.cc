// The plugin "algorithms": four algorithms (plugin.h interface 4), each written against the
// chorus_p2p the core hands run(), so the core runs them over any transport as the collectives
// rhd@tcp, recursive_doubling@ucx, binomial@ofi, torus@... Operations an algorithm does not
// implement run on the core's ring over the same transport (plugin.h, ABI 1.3).
#include <chorus/plugin.h>

#include <chorus/algorithm_sdk.hpp>
#include <chorus/plugin_sdk.hpp>

#include "run_context.h"
#include "schedule.h"

namespace chorus::algorithms {
namespace {

using sdk::Fail;

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;
constexpr size_t kDefaultSegmentBytes = 1 << 20;

// The high byte of every tag marks the algorithm, so that ranks running different algorithms
// fail on a size mismatch or time out rather than mix their data.
constexpr uint64_t TagBase(char letter) { return static_cast<uint64_t>(letter) << 56; }

template <typename Body>
chorus_status Run(const chorus_algorithm_run_args* args, const char* name, Body body) {
  return sdk::Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_algorithm_run_args, num_options), name);
    sdk::ValidateRunArgs(a, name);
    body(a);
  });
}

void RequireOp(const chorus_algorithm_run_args& a, uint32_t supported, const char* name) {
  if ((supported & CHORUS_OP_BIT(a.op)) == 0) {
    Fail(CHORUS_UNSUPPORTED, name, " does not implement operation ", static_cast<int>(a.op),
         " (its supported_ops say which it does)");
  }
}

constexpr uint32_t kRhdOps = CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE);
constexpr uint32_t kRecursiveDoublingOps =
    CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) | CHORUS_OP_BIT(CHORUS_OP_BARRIER);
constexpr uint32_t kBinomialOps = CHORUS_OP_BIT(CHORUS_OP_BROADCAST);
constexpr uint32_t kTorusOps = CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE);

chorus_status RhdRun(const chorus_algorithm_run_args* args) {
  return Run(args, "rhd", [](const chorus_algorithm_run_args& a) {
    RequireOp(a, kRhdOps, "rhd");
    RunContext run(a, "rhd", TagBase('H'));
    RunRhdAllReduce(run);
  });
}

chorus_status RecursiveDoublingRun(const chorus_algorithm_run_args* args) {
  return Run(args, "recursive_doubling", [](const chorus_algorithm_run_args& a) {
    RequireOp(a, kRecursiveDoublingOps, "recursive_doubling");
    RunContext run(a, "recursive_doubling", TagBase('D'));
    if (a.op == CHORUS_OP_BARRIER) {
      RunDisseminationBarrier(run);
    } else {
      RunRecursiveDoublingAllReduce(run);
    }
  });
}

chorus_status BinomialRun(const chorus_algorithm_run_args* args) {
  return Run(args, "binomial", [](const chorus_algorithm_run_args& a) {
    RequireOp(a, kBinomialOps, "binomial");
    const uint64_t segment_bytes =
        sdk::IntegerOption(a.options, a.num_options, "segment_bytes", kDefaultSegmentBytes);
    if (segment_bytes == 0) Fail(CHORUS_INVALID_ARGUMENT, "binomial: segment_bytes must be >= 1");
    RunContext run(a, "binomial", TagBase('B'));
    RunBinomialBroadcast(run, static_cast<size_t>(segment_bytes));
  });
}

chorus_status TorusRun(const chorus_algorithm_run_args* args) {
  return Run(args, "torus", [](const chorus_algorithm_run_args& a) {
    RequireOp(a, kTorusOps, "torus");
    Grid grid = SquarestGrid(a.p2p->size);
    if (const auto text = sdk::FindOption(a.options, a.num_options, "grid")) {
      std::string problem;
      const auto parsed = ParseGrid(*text, a.p2p->size, &problem);
      if (!parsed) Fail(CHORUS_INVALID_ARGUMENT, "torus: ", problem);
      grid = *parsed;
    }
    RunContext run(a, "torus", TagBase('T'));
    RunTorusAllReduce(run, grid);
  });
}

// Scores (ABI 1.3), what the schedules' costs predict in the alpha-beta model (README); the
// core multiplies them by the transport's. The core's ring declares 50 under AUTO at every size.
// None answers RING (tf.distribute's ring) or NCCL.
uint32_t RhdScore(const chorus_score_args* s) {
  if (s->request != CHORUS_REQUEST_AUTO) return 0;
  // The ring's bandwidth in 2 log2 p steps instead of 2(p - 1): a gain where latency still
  // counts and there are enough ranks for the step counts to differ.
  return s->ranks >= 4 && s->bytes >= 64 * kKiB && s->bytes <= kMiB ? 60 : 40;
}

uint32_t RecursiveDoublingScore(const chorus_score_args* s) {
  if (s->request != CHORUS_REQUEST_AUTO) return 0;
  if (s->op == CHORUS_OP_BARRIER) return 60;  // log2 p rounds against the ring's 2(p - 1)
  // log2 p messages, each the whole buffer: the fewest latencies, the most bytes.
  if (s->bytes < 64 * kKiB) return 70;
  return s->bytes <= kMiB ? 30 : 0;
}

uint32_t BinomialScore(const chorus_score_args* s) {
  if (s->request != CHORUS_REQUEST_AUTO) return 0;
  // log2 p levels against the ring's p - 1 hops; for large buffers the root's link carries
  // log2 p copies, where the ring's pipelined chain carries one.
  return s->bytes <= kMiB ? 60 : 40;
}

bool Prime(int n) {
  for (int d = 2; d * d <= n; ++d) {
    if (n % d == 0) return false;
  }
  return true;
}

uint32_t TorusScore(const chorus_score_args* s) {
  if (s->request != CHORUS_REQUEST_AUTO) return 0;
  // Meant for machines whose rows and columns have links of their own (TPU pods); on a flat
  // network it does what a ring does in more steps, so AUTO takes it only where nothing else is.
  return s->ranks >= 4 && !Prime(s->ranks) ? 20 : 0;
}

const chorus_capabilities kRhdCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, kRhdOps, RhdScore);
const chorus_capabilities kRecursiveDoublingCapabilities = sdk::Capabilities(
    sdk::kHostMemory, CHORUS_SHAPE_ANY, kRecursiveDoublingOps, RecursiveDoublingScore);
const chorus_capabilities kBinomialCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, kBinomialOps, BinomialScore);
const chorus_capabilities kTorusCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, kTorusOps, TorusScore);

chorus_algorithm_api Table(const char* name, uint32_t ops,
                           chorus_status (*run)(const chorus_algorithm_run_args*),
                           const chorus_capabilities* capabilities) {
  chorus_algorithm_api t{};
  t.struct_size = sizeof(t);
  t.name = name;
  t.supported_ops = ops;
  t.run = run;
  t.capabilities = capabilities;
  return t;
}

const chorus_algorithm_api kRhd = Table("rhd", kRhdOps, RhdRun, &kRhdCapabilities);
const chorus_algorithm_api kRecursiveDoubling =
    Table("recursive_doubling", kRecursiveDoublingOps, RecursiveDoublingRun,
          &kRecursiveDoublingCapabilities);
const chorus_algorithm_api kBinomial =
    Table("binomial", kBinomialOps, BinomialRun, &kBinomialCapabilities);
const chorus_algorithm_api kTorus = Table("torus", kTorusOps, TorusRun, &kTorusCapabilities);
const chorus_algorithm_api* const kAlgorithms[] = {&kRhd, &kRecursiveDoubling, &kBinomial, &kTorus};

const chorus_plugin kPlugin = [] {
  chorus_plugin t = sdk::PluginTable(
      "algorithms", "1.0.0",
      "algorithms rhd (recursive halving-doubling all-reduce), recursive_doubling (small "
      "all-reduce, barrier), binomial (broadcast), torus (2D-torus all-reduce, grid=XxY), "
      "run over any transport as ALGORITHM@TRANSPORT");
  t.algorithm = kAlgorithms[0];
  t.algorithm_list = kAlgorithms;
  t.num_algorithms = sizeof(kAlgorithms) / sizeof(kAlgorithms[0]);
  return t;
}();

}  // namespace
}  // namespace chorus::algorithms

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::algorithms::kPlugin;
}
