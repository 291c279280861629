// Selection: which collective or cross-device ops runs an operation. The plugins say what they
// serve and how well (plugin.h 1.1: capabilities and a score per operation, dtype and size for a
// job's shape); the user may decide instead. Precedence, highest first:
//
//   constructor argument (CommunicationOptions.implementation, a strategy's cross_device_ops)
//   > variables (CHORUS_COMMUNICATION, CHORUS_ALGORITHM, CHORUS_CROSS_DEVICE_OPS)
//   > the tuning file (CHORUS_TUNING_FILE, as chorus-bench --suggest-rules writes it)
//   > autotuning (CHORUS_AUTOTUNE=1: the candidates timed on the job's own all-reduces during
//     its first steps, the decisions kept in CHORUS_TUNING_CACHE for the next run)
//   > the highest declared score for the operation and size (AUTO; ties: the first loaded).
//
// Nothing here names a plugin: the core's own core_ring and reduction_to_one_device take part
// through the same scores as any plugin's.
#ifndef CHORUS_COLLECTIVE_SELECTION_H_
#define CHORUS_COLLECTIVE_SELECTION_H_

#include <chorus/collective/algorithm_rules.h>
#include <chorus/collective/communication_options.h>
#include <chorus/plugin.h>
#include <chorus/runtime/registry.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus {

// How a job's ranks sit on hosts, and where its buffers live.
struct JobShape {
  int ranks = 1;
  int hosts = 1;
  int ranks_per_host = 1;       // 0 when hosts run different numbers of ranks
  std::string memory = "host";  // "host", or the devices' platform ("cpu", "cuda")
  // The host of each rank, hosts numbered from 0 in the order of their first rank; empty when
  // only the counts are known. Handed to scores as chorus_score_args.host_of_rank (1.6).
  std::vector<uint32_t> host_of_rank;

  // From the host id of every rank (ranks with equal ids share a host).
  static JobShape FromHostIds(const std::vector<std::string>& host_of_rank,
                              std::string memory = "host");
  // "4 ranks on 2 hosts of 2, host memory"
  std::string Describe() const;
  // The two sub-jobs a collective that composes by host runs: the ranks of one host, and one
  // rank on each host (for a job with as many ranks on every host).
  JobShape WithinOneHost() const;
  JobShape OnePerHost() const;
};

chorus_implementation_request RequestOf(CommunicationImplementation implementation);
const char* RequestName(chorus_implementation_request request);  // "AUTO", "RING", "NCCL"

// args.memory points into `shape`, which must outlive the args.
chorus_score_args ScoreArgs(chorus_collective_op op, chorus_dtype dtype, uint64_t bytes,
                            const JobShape& shape, chorus_implementation_request request);

// One implementation's score for one operation; `reason` says why when it is 0.
struct Score {
  uint32_t value = 0;
  std::string reason;
  // The plugin broke the ABI: a score above CHORUS_SCORE_MAX (a negative int seen as unsigned,
  // INT_MAX) or an exception out of its score function. Such a score counts as 0.
  bool invalid = false;
  // The plugin declared CHORUS_SCORE_UNKNOWN (1.6): value is then 1 (it ranks below every known
  // score above 0, see RanksAbove), and autotuning measures it.
  bool unknown = false;
  // "42", or "unknown".
  std::string Text() const;
};
// Whether `a` ranks above `b`: the higher value; at equal values a known score above an unknown.
bool RanksAbove(const Score& a, const Score& b);
// Filters by the capabilities (ops, memory, shape) before it calls the plugin's score; a table
// without capabilities (ABI 1.0) scores 0 ("chosen by name only"). A score above
// CHORUS_SCORE_MAX, or a score function that throws, counts as 0 (Score::invalid): it is a bug,
// and taking it as the maximum would let the broken plugin win AUTO. CHORUS_SCORE_UNKNOWN counts
// as 1 (Score::unknown).
Score ScoreOf(const chorus_capabilities* capabilities, const chorus_score_args& args);
// The value alone, without building the reason (for routing each operation); 1 for unknown.
uint32_t ScoreValue(const chorus_capabilities* capabilities, const chorus_score_args& args);

// Every collective / cross-device ops of `registry` with its score for `args`, best first (ties
// keep registry order). The implementations of plugin `exclude_plugin` are left out.
struct Ranked {
  std::string name;
  std::string plugin;
  Score score;
};
std::vector<Ranked> RankCollectives(const Registry& registry, const chorus_score_args& args,
                                    std::string_view exclude_plugin = {});
std::vector<Ranked> RankCrossDeviceOps(const Registry& registry, const chorus_score_args& args);

// The operations and sizes AUTO looks at to decide which implementations a communicator or a
// strategy creates: every op in `ops` (CHORUS_OP_BIT mask) x every dtype x bytes 0 and 2^0..2^36
// (barrier: 0 only). At run time each operation goes to the best score among those created.
struct GridPoint {
  chorus_collective_op op;
  chorus_dtype dtype;
  uint64_t bytes;
};
std::vector<GridPoint> SelectionGrid(uint32_t ops);

// The tuning file (CHORUS_TUNING_FILE): CHORUS_ALGORITHM's rules per job shape, as chorus-bench
// --suggest-rules writes it:
//
//   # comments
//   [workers=2 hosts=1]
//   allreduce:0-256K=shm,256K-4M=mpi,4M-inf=shm
//
// Rules before any [section] apply to every job; a section applies to jobs of its shape
// (workers=N, hosts=N, either may be *). A job gets the rules of every section it matches, the
// more specific sections first; the first rule covering an operation and size wins.
struct TuningFile {
  std::string path;
  struct Section {
    int workers = 0;  // 0: any
    int hosts = 0;    // 0: any
    std::vector<AlgorithmRule> rules;
    int line = 0;
  };
  std::vector<Section> sections;

  // Throws Error(INVALID_ARGUMENT) naming the file, the line and the problem; for a second
  // section of the same job shape (also a [workers=* hosts=*] section after rules for every job),
  // both lines.
  static TuningFile Parse(const std::string& text, const std::string& path);
  // Throws Error(INVALID_ARGUMENT) naming the path: a directory, a file that does not exist or
  // cannot be read, or what Parse finds.
  static TuningFile Load(const std::string& path);
  // CHORUS_TUNING_FILE's, or an empty one when it is unset.
  static TuningFile FromEnvironment();
  // The rules for a job of `shape`, and the sections they came from ("[workers=2 hosts=1]").
  std::vector<AlgorithmRule> RulesFor(const JobShape& shape, std::string* sections = nullptr) const;
  // The text of a file holding `rules` for jobs of `workers` on `hosts`.
  static std::string Write(int workers, int hosts, const std::vector<AlgorithmRule>& rules,
                           const std::string& comment);
};

// Which collectives a communicator creates, and how each operation picks one.
struct CollectivePlan {
  JobShape shape;
  chorus_implementation_request request = CHORUS_REQUEST_AUTO;
  // Set by a constructor argument or CHORUS_COMMUNICATION naming a collective (or
  // "local+cross"): it runs every operation no CHORUS_ALGORITHM rule routes. Empty: the tuning
  // file, then the scores.
  std::string fixed;
  std::vector<AlgorithmRule> variable_rules;  // CHORUS_ALGORITHM
  std::vector<AlgorithmRule> tuning_rules;    // CHORUS_TUNING_FILE's for this shape
  // The collectives to create, in order (every rank the same); [0] is the primary one, which
  // exchanges signatures and names the communicator.
  std::vector<std::string> collectives;
  std::string source;         // why the primary: "CHORUS_COMMUNICATION=gloo", "AUTO: ..."
  std::string tuning_source;  // "CHORUS_TUNING_FILE=/path [workers=2 hosts=1]", or ""
  // Autotuning (CHORUS_AUTOTUNE=1, under AUTO only): the collectives of `collectives` whose
  // all-reduces are timed against each other, per size band no rule covers, during the job's
  // first all-reduces of that band; empty when off. See collective/autotune.h.
  std::vector<std::string> autotune_candidates;
  int autotune_samples = 0;    // timed calls per candidate and band (CHORUS_AUTOTUNE_SAMPLES)
  std::string autotune_cache;  // CHORUS_TUNING_CACHE: read at creation, written per decision
};

// The plan for a job of `shape`: `implementation` (a constructor argument; AUTO defers) >
// CHORUS_COMMUNICATION (AUTO, RING, NCCL, a collective's name or local+cross) and CHORUS_ALGORITHM
// > CHORUS_TUNING_FILE > autotuning (CHORUS_AUTOTUNE, under AUTO) > scores. Throws Error naming the
// variable and the available names for an unknown name, and saying what is missing when RING or
// NCCL finds no collective answering it.
CollectivePlan PlanCollectives(const Registry& registry, CommunicationImplementation implementation,
                               const JobShape& shape);
// The plan AUTO makes for `shape` as no variable but the tuning ones would change it: the tuning
// file, autotuning (CHORUS_AUTOTUNE, CHORUS_TUNING_CACHE), then the scores; CHORUS_COMMUNICATION
// and CHORUS_ALGORITHM are not read. PlanCollectives' AUTO, and chorus-bench's backend `auto`.
CollectivePlan PlanAuto(const Registry& registry, const JobShape& shape,
                        chorus_implementation_request request = CHORUS_REQUEST_AUTO);
// The plan AUTO makes from the scores alone (no variable, no tuning file), leaving out the
// collectives of plugin `exclude_plugin`: for a collective a plugin composes.
CollectivePlan PlanByScores(const Registry& registry, const JobShape& shape,
                            chorus_implementation_request request,
                            std::string_view exclude_plugin = {});
// A plan that runs everything on the collective `name` (a name or local+cross), with `rules`
// routing some operations and sizes elsewhere.
CollectivePlan PlanNamed(const Registry& registry, const std::string& name, const JobShape& shape,
                         std::vector<AlgorithmRule> rules = {});

// What chorus-info shows for a tuning cache (CHORUS_TUNING_CACHE, written by autotuning): the
// chorus, job shape and candidates it is for, each size band's decision with every candidate's
// time, and whether this user's jobs would use it (or why not).
std::string DescribeTuningCache(const std::string& path);

// Where one operation runs under `plan`, and why ("CHORUS_ALGORITHM", "CHORUS_COMMUNICATION=x",
// "CHORUS_TUNING_FILE ...", "score 80 (best of: shm 80, core_ring 5, gloo 3)"). Scores are taken
// among the plan's collectives.
struct Decision {
  std::string collective;
  std::string source;
};
Decision Decide(const Registry& registry, const CollectivePlan& plan, chorus_collective_op op,
                chorus_dtype dtype, uint64_t bytes);

// The name of the collective `name` selects: a collective's own name for its name or its
// plugin's; "local+cross" (e.g. "shm+gloo") for a collective that composes two by host
// (CHORUS_CAPABILITY_COMPOSES_BY_HOST), in canonical form. Throws Error(INVALID_ARGUMENT) listing
// the available names when one is unknown, or when no loaded collective composes.
std::string CanonicalCollectiveName(const Registry& registry, const std::string& name,
                                    const std::string& what = "the collective name");
// "a+b" -> {"a", "b"}; {"", ""} for a flat name.
std::pair<std::string, std::string> SplitComposite(const std::string& name);
// The collective that composes by host, or throws Error(INVALID_ARGUMENT) saying none is loaded.
Registry::CollectiveImplementation ComposingCollective(const Registry& registry,
                                                       const std::string& what);

}  // namespace chorus

#endif  // CHORUS_COLLECTIVE_SELECTION_H_
