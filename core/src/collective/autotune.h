// Autotuning of AUTO's choice (CHORUS_AUTOTUNE=1): during a job's first all-reduces of each size
// band, the communicator runs them on each candidate collective of its plan in turn, a block of
// consecutive calls each (one untimed, then the samples: a collective's steady state, as a
// benchmark's row measures it, not one call after another collective's), times them,
// and then every rank adopts the same winner per band (the candidate whose slowest rank's median
// time is the lowest), at the same call: the ranks exchange their medians over the primary
// collective, so the decision needs no leader and no rank can diverge. The decisions go to a
// tuning cache (CHORUS_TUNING_CACHE), a tuning file with a header that says which chorus, plugin
// set and job shape it is for, so that the next run of the same job starts tuned.
//
// Only all_reduce is tuned (what training runs); other operations route as without autotuning.
#ifndef CHORUS_CORE_COLLECTIVE_AUTOTUNE_H_
#define CHORUS_CORE_COLLECTIVE_AUTOTUNE_H_

#include <chorus/collective/algorithm_rules.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chorus::internal {

// CHORUS_AUTOTUNE (0 or 1, default 0), CHORUS_AUTOTUNE_SAMPLES (timed calls per candidate and
// band, default 5), CHORUS_AUTOTUNE_CANDIDATES (candidates per size the scores rank, default 3),
// CHORUS_TUNING_CACHE (a path, or unset). Throws Error(INVALID_ARGUMENT) naming a bad value.
struct AutotuneSettings {
  bool enabled = false;
  int samples = 5;
  int candidates_per_size = 3;
  std::string cache_path;
  static AutotuneSettings FromEnvironment();
};

// The size bands autotuning decides for: [0, 4K), then powers of 4 from 4K ([4K, 16K),
// [16K, 64K), ...), the last from 16G without an upper end. Bytes as nccl-tests counts them.
struct SizeBand {
  uint64_t lo = 0;
  uint64_t hi = 0;  // excluded; UINT64_MAX for the last band
};
SizeBand BandOf(uint64_t bytes);
std::string DescribeBand(const SizeBand& band);  // "64K-256K"

// One band's decision: the winner and every candidate's time (the slowest rank's median, us).
struct BandDecision {
  SizeBand band;
  std::string winner;
  std::vector<std::pair<std::string, double>> times_us;  // candidate, time; in plan order
  // "all_reduce 64K-256K: shm 12.3 us, core_ring 40.1 us -> shm"
  std::string Describe() const;
};

// The winner among `times_us` (one per candidate, the slowest rank's median): the lowest time,
// ties to the first; but the scores' pick `incumbent` (an index, or times_us.size() for none)
// stays unless the fastest is at least kAutotuneMargin faster: on a machine whose timings of one
// collective vary by 5-15% between runs, a smaller lead is as likely noise as speed.
constexpr double kAutotuneMargin = 0.10;
size_t FastestCandidate(const std::vector<double>& times_us, size_t incumbent);

// The median of `samples` (not empty).
double MedianOf(std::vector<double> samples);

// What a tuning cache is for: a decision applies only to the same job shape, chorus and plugin
// set (the candidates and the plugins that serve them, with versions and ABIs).
struct TuningCacheKey {
  int workers = 0;
  int hosts = 0;
  int ranks_per_host = 0;
  std::string chorus_version;
  std::string candidates;           // "shm (shm 1.1.0, ABI 1.5), core_ring (core 1.0.0, ABI 1.5)"
  std::string Fingerprint() const;  // 16 hex digits over everything above
};

// The text of a cache holding `decisions` (a tuning file: a section [workers= hosts=] with
// allreduce rules, and '#!' header lines the reader checks; readable as CHORUS_TUNING_FILE too).
std::string WriteTuningCache(const TuningCacheKey& key, const std::vector<BandDecision>& decisions);

// A cache read back: its decisions, or why it is not used (`problem`: "" when it is).
struct TuningCacheRead {
  std::vector<BandDecision> decisions;
  std::string problem;
  // The file is not this job's to replace (another user's, or others may write it).
  bool foreign = false;
};
// Parses `text` (the file at `path`, for messages) for `key`. Never throws: a file of another
// chorus version, plugin set or job shape, a truncated or malformed file, is a problem saying so.
TuningCacheRead ParseTuningCache(const std::string& text, const std::string& path,
                                 const TuningCacheKey& key);
// Reads the file at `path`: also a problem when it belongs to another user or others may write
// it (a cache someone else can write could steer this job's collectives). A file that does not
// exist is no problem and no decision.
TuningCacheRead ReadTuningCache(const std::string& path, const TuningCacheKey& key);
// Replaces the file at `path` with `text` at once (a temporary file in the same folder, then
// rename): a reader sees the old file or the new one, never a torn one, also when two jobs write.
// Throws Error(UNAVAILABLE) naming the path when it cannot.
void ReplaceFileAtomically(const std::string& path, const std::string& text);

// What chorus-info shows for a cache file: its key, each decision with its figures, and whether
// it is usable as read by this user.
std::string DescribeTuningCacheFile(const std::string& path);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_COLLECTIVE_AUTOTUNE_H_
