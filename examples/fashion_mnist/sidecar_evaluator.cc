#include "sidecar_evaluator.h"

#include <chorus/base/error.h>
#include <chorus/training/checkpoint.h>
#include <chorus/training/checkpoint_manager.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "model.h"
#include "trainer.h"

namespace fashion_mnist {
namespace {

Evaluation EvaluateMlpCheckpoint(const std::string& path, const ImageSet& test,
                                 const SidecarOptions& options) {
  const Model model;  // no strategy: plain variables, replaced by the restore
  chorus::Checkpoint checkpoint;
  TrackModel(checkpoint, model);
  checkpoint.Restore(path);
  return EvaluateWithoutStrategy(model, test, options.batch_size);
}

}  // namespace

int RunSidecarEvaluator(const ImageSet& test, const SidecarOptions& options) {
  using Clock = std::chrono::steady_clock;
  // A checkpoint recorded before this evaluator started belongs to an earlier run; the name and
  // the time of the file tell a new one (a rerun writes the same names).
  const auto version = [](const std::string& path) {
    std::error_code error;
    const auto time = std::filesystem::last_write_time(path, error);
    return path + "@" + std::to_string(error ? 0 : time.time_since_epoch().count());
  };
  // The latest whole checkpoint; a warning (an index that names a missing file) is printed when it
  // first appears, not at every poll.
  std::string last_warning;
  const auto latest_whole = [&options, &last_warning] {
    const chorus::FoundCheckpoint found = chorus::FindLatestCheckpoint(options.checkpoint_dir);
    if (!found.warning.empty() && found.warning != last_warning) {
      std::printf("Evaluator: warning: %s\n", found.warning.c_str());
    }
    last_warning = found.warning;
    return found.path;
  };
  std::string latest_at_start = latest_whole();
  std::string seen = latest_at_start.empty() ? "" : version(latest_at_start);
  const std::string final_name = "ckpt-" + std::to_string(options.final_epoch);
  std::printf("Evaluator: following %s for new checkpoints, until %s\n",
              options.checkpoint_dir.c_str(), final_name.c_str());
  std::fflush(stdout);
  int evaluated = 0;
  auto last_new = Clock::now();
  while (true) {
    const std::string latest = latest_whole();
    if (!latest.empty() && version(latest) != seen) {
      seen = version(latest);
      last_new = Clock::now();
      const Evaluation e = options.evaluate ? options.evaluate(latest, test)
                                            : EvaluateMlpCheckpoint(latest, test, options);
      std::printf("Evaluator: %s: Test Loss: %.4f, Test Accuracy: %.2f\n", latest.c_str(), e.loss,
                  e.accuracy);
      std::fflush(stdout);
      ++evaluated;
      if (std::filesystem::path(latest).filename() == final_name) return evaluated;
    }
    if (Clock::now() - last_new > options.idle_timeout) {
      throw chorus::Error(CHORUS_TIMEOUT,
                          "the evaluator saw no new checkpoint in '" + options.checkpoint_dir +
                              "' for " + std::to_string(options.idle_timeout.count() / 1000) +
                              " s; is the chief running and saving there (--checkpoint-dir)?");
    }
    std::this_thread::sleep_for(options.poll);
  }
}

}  // namespace fashion_mnist
