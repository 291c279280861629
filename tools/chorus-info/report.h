// What chorus-info reports: plugins, devices, selections, scores and rejected candidates, as a
// model built once and printed three ways: a summary that fits 100 columns, the full score matrix
// (--all), and JSON for tools (--json). Where the core changes a declared score it says so: a
// pair algorithm@transport scores algorithm x transport / 100, a score above CHORUS_SCORE_MAX is
// taken as 0, and a table without capabilities is chosen by name only.
#ifndef CHORUS_TOOLS_INFO_REPORT_H_
#define CHORUS_TOOLS_INFO_REPORT_H_

#include <chorus/plugin.h>
#include <chorus/runtime/registry.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace chorus::info {

// The job chorus-info describes the collectives' selection for.
struct JobDescription {
  int workers = 2;
  int hosts = 1;
  std::string implementation = "AUTO";  // as CommunicationOptions.implementation: AUTO, RING, NCCL
};

// One operation at one size: every candidate's score, the choice and why it won.
struct ScoreRow {
  chorus_collective_op op = CHORUS_OP_ALL_REDUCE;
  uint64_t bytes = 0;            // 0 for barrier
  std::vector<uint32_t> scores;  // one per ScoreTable::names
  // One per ScoreTable::names: for a pair algorithm@transport (core_ring = ring@tcp too) how its
  // score is made, "ring 50 x ucx 30 / 100"; "" for every other collective.
  std::vector<std::string> how;
  std::string chosen;  // "none" when nothing serves it
  std::string why;     // "best score", a variable's rule, the tuning file's line
};

// The scores of every implementation of one kind (cross-device ops over the default devices, or
// the collectives of the job) per operation and size.
struct ScoreTable {
  std::string title;
  std::string error;  // set when the table could not be built
  std::vector<std::string> names;
  std::vector<ScoreRow> rows;
  std::vector<std::pair<std::string, std::string>> excluded;  // name, why it scores 0
  // name, a declared score the core took as 0 (the first row where it did): "scores 250 for
  // all_reduce of 1 MiB: above 100, taken as 0".
  std::vector<std::pair<std::string, std::string>> discarded;
  // The names without capabilities (for a pair: a half without), chosen by name only.
  std::vector<std::string> by_name_only;
  std::vector<std::string> notes;  // the plan's primary, composition, rules
};

struct Report {
  // Each folder with its state: "" when it was searched, else "(does not exist)", "(skipped: ...)".
  std::vector<std::pair<std::string, std::string>> search_dirs;
  std::string plugin_filter;
  bool plugins_only = false;
  // Selections by the current variables.
  std::vector<std::string> default_devices;
  std::string cross_device_ops, cross_device_ops_source;
  std::vector<std::string> available_cross_device_ops;
  std::string job_shape;
  std::string collective, collective_source;
  std::vector<std::string> available_collectives;
  std::vector<std::string> errors;  // variables that select nothing usable: chorus-info exits 2
  ScoreTable cross_device_ops_scores, collective_scores;
};

Report BuildReport(const Registry& registry, const JobDescription& job, bool plugins_only);

// The summary: every line at most 100 columns (a path or name longer than a line stays whole);
// per operation and size range the pick, the runner-up and why.
void PrintSummary(const Registry& registry, const Report& report, std::ostream& out);
// As the summary, with the full score matrix and why each excluded candidate scores 0.
void PrintAll(const Registry& registry, const Report& report, std::ostream& out);
void PrintJson(const Registry& registry, const Report& report, std::ostream& out);

}  // namespace chorus::info

#endif  // CHORUS_TOOLS_INFO_REPORT_H_
