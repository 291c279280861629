#include "score_checks.h"

#include <chorus/base/dtype.h>
#include <chorus/collective/selection.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "declarations.h"

namespace chorus::conformance::internal {
namespace {

constexpr uint64_t kSizes[] = {
    0, 1, 4096, uint64_t{1} << 20, uint64_t{64} << 20, uint64_t{1} << 30};
constexpr chorus_implementation_request kRequests[] = {CHORUS_REQUEST_AUTO, CHORUS_REQUEST_RING,
                                                       CHORUS_REQUEST_NCCL};
// Failures reported per rule; the rest are counted.
constexpr size_t kShownPerRule = 3;

struct Shape {
  int32_t ranks, hosts, ranks_per_host;
};

// Cross-device ops serve the devices of one host; the others a job of workers.
std::vector<Shape> ShapesFor(ScoredKind kind) {
  if (kind == ScoredKind::kCrossDeviceOps) return {{2, 1, 2}, {3, 1, 3}, {4, 1, 4}};
  return {{2, 1, 2}, {3, 1, 3}, {4, 2, 2}, {4, 4, 1}};
}

std::string ShapeText(ScoredKind kind, const chorus_score_args& a) {
  if (kind == ScoredKind::kCrossDeviceOps) return std::to_string(a.ranks) + " devices";
  std::string text = std::to_string(a.ranks) + " ranks on ";
  if (a.hosts == 1) return text + "1 host";
  return text + std::to_string(a.hosts) + " hosts of " + std::to_string(a.ranks_per_host);
}

const char* RequestText(chorus_implementation_request request) {
  return request == CHORUS_REQUEST_AUTO ? "AUTO" : request == CHORUS_REQUEST_RING ? "RING" : "NCCL";
}

// "all_reduce of 1 MiB (f32) on 4 ranks on 2 hosts of 2, host memory, AUTO request"
std::string PointText(ScoredKind kind, const chorus_score_args& a) {
  std::string text = CollectiveOpName(a.op);
  if (a.op != CHORUS_OP_BARRIER) {
    text += std::string(" of ") + ScoreSizeName(a.bytes) + " (" + DtypeName(a.dtype) + ")";
  }
  return text + " on " + ShapeText(kind, a) + ", " + a.memory + " memory, " +
         RequestText(a.request) + " request";
}

// The memory each score is asked for: every declared kind ("*": host memory, what the kit has);
// a pair's halves are asked for host memory, the only memory a pair serves.
std::vector<std::string> MemoryFor(ScoredKind kind, const chorus_capabilities& c) {
  if (kind == ScoredKind::kAlgorithm || kind == ScoredKind::kTransport) return {"host"};
  constexpr size_t kMaxMemoryKinds = 64;
  std::vector<std::string> memory;
  for (size_t i = 0; c.memory != nullptr && i < kMaxMemoryKinds && c.memory[i] != nullptr; ++i) {
    const std::string m = c.memory[i];
    if (!m.empty()) memory.push_back(m == "*" ? "host" : m);
  }
  return memory;
}

bool ServesHost(const chorus_capabilities& c) {
  constexpr size_t kMaxMemoryKinds = 64;
  for (size_t i = 0; c.memory != nullptr && i < kMaxMemoryKinds && c.memory[i] != nullptr; ++i) {
    const std::string_view m = c.memory[i];
    if (m == "*" || m == "host" || m == "cpu") return true;
  }
  return false;
}

// One rule's failures: the first few in full, then a count.
struct RuleFailures {
  std::vector<std::string> shown;
  int more = 0;
  void Add(std::string message) {
    if (shown.size() < kShownPerRule) {
      shown.push_back(std::move(message));
    } else {
      ++more;
    }
  }
  void AppendTo(std::vector<std::string>* failures, const char* rule) const {
    failures->insert(failures->end(), shown.begin(), shown.end());
    if (more > 0) {
      failures->push_back(std::to_string(more) + " more points of the grid break the rule '" +
                          rule + "'");
    }
  }
};

// How a name selects the table (AUTO aside).
std::string SelectedBy(ScoredKind kind, const std::string& name, const ScoreReference& reference) {
  switch (kind) {
    case ScoredKind::kCrossDeviceOps:
      return "CHORUS_CROSS_DEVICE_OPS=" + name;
    case ScoredKind::kCollective:
      return "CHORUS_COMMUNICATION=" + name + ", a CHORUS_ALGORITHM rule or the tuning file";
    case ScoredKind::kAlgorithm:
      return "CHORUS_COMMUNICATION=" + name + "@" +
             (reference.partner_name.empty() ? "tcp" : reference.partner_name);
    case ScoredKind::kTransport:
      return "CHORUS_COMMUNICATION=" +
             (reference.partner_name.empty() ? "ring" : reference.partner_name) + "@" + name;
  }
  return name;
}

// The note for a table whose AUTO scores never beat the reference. `best` is its highest AUTO
// score (taken as the core takes it) at `best_at`; `ring` and `nccl` its highest for those
// requests, which choose among the tables that answer them.
std::string NeverChosenNote(ScoredKind kind, const std::string& name, const chorus_capabilities& c,
                            const ScoreReference& reference, uint32_t best,
                            const chorus_score_args& best_at, uint32_t reference_best,
                            uint32_t ring, uint32_t nccl) {
  const bool plural = kind == ScoredKind::kCrossDeviceOps;  // "cross-device ops score"
  const std::string what = std::string(ScoredKindName(kind)) + " '" + name + "' ";
  const std::string scores = plural ? "score " : "scores ";
  const std::string it = plural ? "them" : "it";
  const bool pair_half = kind == ScoredKind::kAlgorithm || kind == ScoredKind::kTransport;
  std::string note = what;
  if (best == 0) {
    note += scores + "0 under AUTO for every operation, size, dtype and job shape the kit asks";
  } else {
    note += scores + "at most " + std::to_string(best) + " under AUTO";
    if (!pair_half) {
      note += ", never above the core's " + reference.name + " (" + std::to_string(reference_best) +
              ")";
      if (best == reference_best) note += " (a tie goes to the core, loaded first)";
    }
  }
  if (pair_half) {
    const bool algorithm = kind == ScoredKind::kAlgorithm;
    const std::string pairs = algorithm ? name + "@<transport>" : "<algorithm>@" + name;
    note += "; its pairs " + pairs + " score " +
            (algorithm ? name + " x transport" : "algorithm x " + name) + " / " +
            std::to_string(CHORUS_SCORE_MAX);
    if (best > 0) {
      note += std::string(", so even ") + (algorithm ? "over a transport" : "with an algorithm") +
              " that scores " + std::to_string(CHORUS_SCORE_MAX) +
              " they never rise above the core's " + reference.name + " (" +
              std::to_string(reference_best) + ")";
    }
    note += ": AUTO never picks them; only a name selects one (" +
            SelectedBy(kind, name, reference) + ")";
  } else {
    note += ": AUTO never picks " + it + "; only a name selects " + it + " (" +
            SelectedBy(kind, name, reference) + ")";
  }
  for (const auto& [request, score] : {std::pair{"RING", ring}, std::pair{"NCCL", nccl}}) {
    if (score > 0) {
      note += std::string(", or a ") + request + " request (it scores up to " +
              std::to_string(score) + " for " + request + ")";
    }
  }
  // What chorus-info shows for it.
  if (pair_half && reference.partner != nullptr) {
    const uint32_t partner = ScoreValue(reference.partner, best_at);
    const uint32_t algorithm_score = kind == ScoredKind::kAlgorithm ? best : partner;
    const uint32_t transport_score = kind == ScoredKind::kAlgorithm ? partner : best;
    const std::string algorithm = kind == ScoredKind::kAlgorithm ? name : reference.partner_name;
    const std::string transport = kind == ScoredKind::kAlgorithm ? reference.partner_name : name;
    note += ". chorus-info --all shows " + algorithm + "@" + transport + " " +
            std::to_string(algorithm_score * transport_score / CHORUS_SCORE_MAX) +
            " (= " + algorithm + " " + std::to_string(algorithm_score) + " x " + transport + " " +
            std::to_string(transport_score) + " / " + std::to_string(CHORUS_SCORE_MAX) + ")";
  } else if (best == 0) {
    note += ". chorus-info --all shows '-' for " + it +
            " in every row, and why: 'scores 0 for ... (AUTO request)'";
  } else {
    note += ". chorus-info --all shows " + it + " below " + reference.name +
            " in every row, never as the pick";
  }
  if ((c.flags & CHORUS_CAPABILITY_COMPOSES_BY_HOST) != 0) {
    note += "; it composes others, so its score depends on the collectives loaded beside it";
  }
  return note + ". Declare more only where chorus-bench measured " + it +
         " faster (sdk/README.md, section 5). A note, not a failure";
}

}  // namespace

const char* ScoredKindName(ScoredKind kind) {
  switch (kind) {
    case ScoredKind::kCrossDeviceOps:
      return "cross-device ops";
    case ScoredKind::kCollective:
      return "collective";
    case ScoredKind::kAlgorithm:
      return "algorithm";
    case ScoredKind::kTransport:
      return "transport";
  }
  return "table";
}

namespace {

// The capabilities of the core's table `name` among `tables`, NULL when there is none.
template <typename Api>
const chorus_capabilities* CoreCapabilities(const std::vector<const Api*>& tables,
                                            std::string_view name) {
  for (const Api* t : tables) {
    if (t != nullptr && t->name != nullptr && name == t->name) return t->capabilities;
  }
  return nullptr;
}

}  // namespace

ScoreReference CoreReference(const PluginLibrary& core, ScoredKind kind) {
  ScoreReference reference;
  if (kind == ScoredKind::kCrossDeviceOps) {
    reference.name = kReductionToOneDevice;
    reference.capabilities = CoreCapabilities(core.cross_device_ops_list(), kReductionToOneDevice);
    return reference;
  }
  reference.name = std::string(kCoreRingName) + " = " + kCoreRingPairName;
  reference.capabilities = CoreCapabilities(core.collectives(), kCoreRingName);
  // A pair's other half: an algorithm's pairs over the core's tcp, a transport's under its ring.
  if (kind == ScoredKind::kAlgorithm) {
    reference.partner_name = "tcp";
    reference.partner = CoreCapabilities(core.transports(), "tcp");
  } else if (kind == ScoredKind::kTransport) {
    reference.partner_name = "ring";
    reference.partner = CoreCapabilities(core.algorithms(), "ring");
  }
  return reference;
}

std::string ScoreSizeName(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024;
  if (bytes >= (kKiB << 20) && bytes % (kKiB << 20) == 0) {
    return std::to_string(bytes >> 30) + " GiB";
  }
  if (bytes >= (kKiB << 10) && bytes % (kKiB << 10) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string NoCapabilitiesNote(ScoredKind kind, const std::string& name) {
  const std::string what = std::string(ScoredKindName(kind)) + " '" + name + "'";
  const bool pair_half = kind == ScoredKind::kAlgorithm || kind == ScoredKind::kTransport;
  const std::string selected =
      pair_half
          ? "its pairs are chosen by name only (" + SelectedBy(kind, name, {}) + ")"
          : "AUTO never picks it; only a name selects it (" + SelectedBy(kind, name, {}) + ")";
  return what + " declares no capabilities: " + selected +
         ". chorus-info says 'declares no capabilities ...: chosen by name only'. Set capabilities "
         "with the score chorus-bench measured (sdk/README.md, section 5). A note, not a failure";
}

ScoreFindings CheckScores(ScoredKind kind, const std::string& name, const chorus_capabilities& c,
                          uint32_t runs_ops, const ScoreReference& reference) {
  ScoreFindings findings;
  const std::string what = std::string(ScoredKindName(kind)) + " '" + name + "'";
  const bool pair_half = kind == ScoredKind::kAlgorithm || kind == ScoredKind::kTransport;
  if (pair_half && !ServesHost(c)) {
    findings.failures.push_back(
        what +
        ": capabilities.memory lists neither \"host\" nor \"*\"; its pairs serve host "
        "memory only, so they would score 0 everywhere: declare {\"host\"} (plugin.h) "
        "[rule: a pair's halves serve host memory]");
    return findings;
  }
  // A transport's ops are ignored: the core asks it for every operation of the algorithm.
  const uint32_t ops = kind == ScoredKind::kTransport ? kKnownOps : c.ops & kKnownOps;
  RuleFailures out_of_range, impure, not_run;
  // The highest score of each op the algorithm does not run, to name in the failure.
  std::map<int, uint32_t> unrun_scores;
  uint32_t best = 0, reference_best = 0, ring_best = 0, nccl_best = 0;
  bool chosen_somewhere = false, asked_auto = false;
  const auto memory = MemoryFor(kind, c);  // before best_at, whose memory points into it
  chorus_score_args best_at{};
  for (int op = CHORUS_OP_ALL_REDUCE; op <= CHORUS_OP_BARRIER; ++op) {
    if ((ops & CHORUS_OP_BIT(op)) == 0) continue;
    const bool unrun = kind == ScoredKind::kAlgorithm && (runs_ops & CHORUS_OP_BIT(op)) == 0;
    if (unrun) unrun_scores[op] = 0;
    for (chorus_dtype dtype : AllDtypes()) {
      // A barrier moves no data: asked once, for 0 bytes of u8.
      if (op == CHORUS_OP_BARRIER && dtype != CHORUS_U8) continue;
      for (uint64_t bytes : kSizes) {
        if (op == CHORUS_OP_BARRIER && bytes > 0) continue;
        for (const Shape& shape : ShapesFor(kind)) {
          if (c.shape == CHORUS_SHAPE_ONE_HOST && shape.hosts > 1) continue;
          for (const std::string& m : memory) {
            for (chorus_implementation_request request : kRequests) {
              chorus_score_args args{};
              args.struct_size = sizeof(args);
              args.op = static_cast<chorus_collective_op>(op);
              args.dtype = dtype;
              args.bytes = bytes;
              args.ranks = shape.ranks;
              args.hosts = shape.hosts;
              args.ranks_per_host = shape.ranks_per_host;
              args.memory = m.c_str();
              args.request = request;
              args.context = c.context;
              const uint32_t first = c.score(&args);
              const uint32_t second = c.score(&args);
              const std::string point = PointText(kind, args);
              if (first > CHORUS_SCORE_MAX && first != CHORUS_SCORE_UNKNOWN) {
                out_of_range.Add(
                    what + " scores " + std::to_string(first) + " for " + point + ": above " +
                    "CHORUS_SCORE_MAX (" + std::to_string(CHORUS_SCORE_MAX) + "), so the core " +
                    "takes it as 0 there (a broken score never wins); return 0.." +
                    std::to_string(CHORUS_SCORE_MAX) + " (a negative int returned as uint32_t " +
                    "looks like this) [rule: every score within 0..CHORUS_SCORE_MAX]");
              }
              if (first != second) {
                impure.Add(what + " scores " + std::to_string(first) + ", then " +
                           std::to_string(second) + " for " + point + ": compute the score from " +
                           "the arguments only (every rank must get the same answer, and the " +
                           "core asks from any thread) [rule: the same answer when asked twice]");
              }
              // As the core takes it: CHORUS_SCORE_UNKNOWN (1.6) ranks as 1 until measured.
              const uint32_t taken =
                  first == CHORUS_SCORE_UNKNOWN ? 1 : (first <= CHORUS_SCORE_MAX ? first : 0);
              if (unrun) {
                unrun_scores[op] = std::max(unrun_scores[op], taken);
                continue;  // the core never asks a pair for it
              }
              if (request == CHORUS_REQUEST_RING) ring_best = std::max(ring_best, taken);
              if (request == CHORUS_REQUEST_NCCL) nccl_best = std::max(nccl_best, taken);
              if (request != CHORUS_REQUEST_AUTO) continue;
              asked_auto = true;
              const uint32_t against =
                  reference.capabilities != nullptr ? ScoreValue(reference.capabilities, args) : 0;
              reference_best = std::max(reference_best, against);
              chosen_somewhere = chosen_somewhere || taken > against;
              if (taken > best || best_at.struct_size == 0) {
                best = taken;
                best_at = args;
              }
            }
          }
        }
      }
    }
  }
  for (const auto& [op, score] : unrun_scores) {
    if (score == 0) continue;  // never asked by the core, and harmless
    not_run.Add(what + ": capabilities.ops declares " +
                CollectiveOpName(static_cast<chorus_collective_op>(op)) +
                ", which supported_ops lacks (it scores up to " + std::to_string(score) +
                " there); the core drops it from the pairs' ops, so AUTO never routes it here: " +
                "add it to supported_ops (and run() it) or take it out of capabilities.ops " +
                "[rule: a score > 0 only for an operation in ops that the table runs]");
  }
  out_of_range.AppendTo(&findings.failures, "every score within 0..CHORUS_SCORE_MAX");
  impure.AppendTo(&findings.failures, "the same answer when asked twice");
  not_run.AppendTo(&findings.failures,
                   "a score > 0 only for an operation in ops that the table runs");
  // The note: the reference itself (the kit on the core) and a table the kit could not ask
  // under AUTO get none.
  if (reference.capabilities != nullptr && reference.capabilities != &c && asked_auto &&
      !chosen_somewhere) {
    findings.notes.push_back(NeverChosenNote(kind, name, c, reference, best, best_at,
                                             reference_best, ring_best, nccl_best));
  }
  return findings;
}

}  // namespace chorus::conformance::internal
