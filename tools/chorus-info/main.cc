// chorus-info: every plugin found, its path, ABI version, what it provides, the devices seen,
// which backend the current variables select, what AUTO picks per operation and size for a job's
// shape and why (--all: every score; --json: for tools), where the core changes a declared score
// (a pair's algorithm x transport / 100, a score above CHORUS_SCORE_MAX taken as 0, a table
// without capabilities chosen by name only), and why each rejected candidate was rejected.
// --tuning-cache PATH shows what autotuning decided and measured (CHORUS_TUNING_CACHE).
#include <chorus/base/error.h>
#include <chorus/collective/selection.h>
#include <chorus/plugin.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "report.h"

int main(int argc, char** argv) {
  CLI::App app{"chorus-info: the plugins, devices and backends chorus sees here"};
  bool plugins_only = false, all = false, json = false;
  chorus::info::JobDescription job;
  app.add_flag("--plugins-only", plugins_only, "list plugins and rejected candidates only");
  app.add_flag("--all", all,
               "every implementation's score per operation and size, and why each excluded one "
               "scores 0 (lines as wide as the names need)");
  app.add_flag("--json", json, "everything as one JSON object, for tools");
  app.add_option("--workers", job.workers,
                 "workers of the job whose collectives' scores to show (default 2)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--hosts", job.hosts, "hosts those workers run on (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--implementation", job.implementation,
                 "CommunicationOptions.implementation: AUTO (default: the variables and scores "
                 "decide), RING or NCCL")
      ->check(CLI::IsMember({"AUTO", "RING", "NCCL"}));
  std::string tuning_cache;
  app.add_option("--tuning-cache", tuning_cache,
                 "show the tuning cache at this path (CHORUS_TUNING_CACHE, written by "
                 "CHORUS_AUTOTUNE=1): the job shape, chorus and candidates it is for, each size "
                 "band's winner with every candidate's time, and whether this user's jobs would "
                 "use it; nothing else is printed");
  CLI11_PARSE(app, argc, argv);
  if (!tuning_cache.empty()) {
    const std::string text = chorus::DescribeTuningCache(tuning_cache);
    std::cout << text;
    // Usable or not is information, not failure; a file that is no cache at all is bad input.
    return text.find("not a chorus tuning cache") != std::string::npos ||
                   text.find(": cannot be read") != std::string::npos
               ? 2
               : 0;
  }
  if (job.hosts > job.workers) {
    std::cerr << "chorus-info: --hosts " << job.hosts << " is more than --workers " << job.workers
              << "\n";
    return 2;
  }

  std::vector<std::string> selection_errors;
  try {
    chorus::Registry& registry = chorus::Registry::Global();
    const chorus::info::Report report = chorus::info::BuildReport(registry, job, plugins_only);
    if (json) {
      chorus::info::PrintJson(registry, report, std::cout);
    } else if (all) {
      chorus::info::PrintAll(registry, report, std::cout);
    } else {
      chorus::info::PrintSummary(registry, report, std::cout);
    }
    selection_errors = report.errors;
  } catch (const chorus::Error& e) {
    std::cerr << "chorus-info: " << e.what() << "\n";
    return 2;
  }
  // A variable that selects nothing usable would fail every job: say so, and fail.
  for (const std::string& error : selection_errors) std::cerr << "chorus-info: " << error << "\n";
  return selection_errors.empty() ? 0 : 2;
}
