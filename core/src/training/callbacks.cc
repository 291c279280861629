#include <chorus/base/error.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/callbacks.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "training/writer_outcome.h"

namespace chorus {
namespace {

constexpr int kBarWidth = 30;

std::string Duration(double seconds) {
  const auto whole = static_cast<long long>(std::llround(seconds));
  char text[32];
  if (whole >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", whole / 3600, whole / 60 % 60,
                  whole % 60);
  } else if (whole >= 60) {
    std::snprintf(text, sizeof text, "%lld:%02lld", whole / 60, whole % 60);
  } else {
    std::snprintf(text, sizeof text, "%llds", whole);
  }
  return text;
}

std::string Figures(double loss, double accuracy) {
  char text[96];
  std::snprintf(text, sizeof text, " - loss: %.4f - accuracy: %.4f", loss, accuracy);
  return text;
}

std::string Counter(int64_t step, int64_t steps) {
  const std::string total = std::to_string(steps);
  std::string done = std::to_string(step);
  return std::string(total.size() > done.size() ? total.size() - done.size() : 0, ' ') + done +
         "/" + total;
}

void TrackModelAndOptimizer(Checkpoint& checkpoint, const FitState& state, bool with_optimizer) {
  for (const Variable& variable : state.model->trainable_variables()) {
    checkpoint.Track("model/" + variable.name(), variable);
  }
  // Under parameter servers the optimizer runs on the ps tasks: there is none here.
  if (with_optimizer && state.optimizer != nullptr) checkpoint.Track("optimizer", *state.optimizer);
}

void CreateDirectoryFor(const std::filesystem::path& file) {
  if (!file.has_parent_path()) return;
  std::error_code error;
  std::filesystem::create_directories(file.parent_path(), error);
  if (error) {
    throw Error(CHORUS_INVALID_ARGUMENT, "cannot create the directory '" +
                                             file.parent_path().string() + "': " + error.message());
  }
}

}  // namespace

// ---- ProgressBar

ProgressBar::ProgressBar(Mode mode, std::FILE* out) : out_(out), mode_(mode) {}

void ProgressBar::on_train_begin(FitState& state) {
  (void)state;
  bar_ = mode_ == Mode::kBar || (mode_ == Mode::kAuto && isatty(fileno(out_)) == 1);
}

void ProgressBar::on_epoch_begin(FitState& state) {
  epoch_start_ = std::chrono::steady_clock::now();
  std::fprintf(out_, "Epoch %d/%d\n", state.epoch + 1, state.options->epochs);
  std::fflush(out_);
}

void ProgressBar::on_train_batch_end(FitState& state, int64_t step, double loss, double accuracy) {
  if (!bar_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  const int64_t steps = state.steps_per_epoch;
  const double left = elapsed / static_cast<double>(step) * static_cast<double>(steps - step);
  const int filled = static_cast<int>(kBarWidth * step / std::max<int64_t>(steps, 1));
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarWidth) bar += '>';
  bar.resize(kBarWidth, '.');
  std::fprintf(out_, "\r%s [%s] - ETA: %s%s\033[K", Counter(step, steps).c_str(), bar.c_str(),
               Duration(left).c_str(), Figures(loss, accuracy).c_str());
  std::fflush(out_);
}

void ProgressBar::on_epoch_end(FitState& state, const EpochLogs& logs) {
  const double per_step =
      logs.steps > 0 ? 1000.0 * logs.seconds / static_cast<double>(logs.steps) : 0.0;
  (void)state;
  std::string line = Counter(logs.steps, logs.steps);
  if (bar_) line = "\r" + line + " [" + std::string(kBarWidth, '=') + "]";
  char timing[64];
  std::snprintf(timing, sizeof timing, " - %s %.0fms/step", Duration(logs.seconds).c_str(),
                per_step);
  line += timing + Figures(logs.loss, logs.accuracy);
  if (logs.val_loss) {
    char validation[96];
    std::snprintf(validation, sizeof validation, " - val_loss: %.4f - val_accuracy: %.4f",
                  *logs.val_loss, logs.val_accuracy.value_or(0.0));
    line += validation;
  }
  std::fprintf(out_, "%s%s\n", line.c_str(), bar_ ? "\033[K" : "");
  std::fflush(out_);
}

// ---- ModelCheckpoint

ModelCheckpoint::ModelCheckpoint(std::string path, bool weights_only)
    : path_(std::move(path)), weights_only_(weights_only) {
  if (path_.empty()) throw Error(CHORUS_INVALID_ARGUMENT, "ModelCheckpoint: the path is empty");
}

ModelCheckpoint::ModelCheckpoint(CheckpointManager& manager, bool weights_only)
    : manager_(&manager), weights_only_(weights_only) {}

void ModelCheckpoint::on_epoch_end(FitState& state, const EpochLogs& logs) {
  Checkpoint checkpoint;
  TrackModelAndOptimizer(checkpoint, state, !weights_only_);
  if (manager_ != nullptr) {
    last_saved_ = manager_->Save(checkpoint, logs.epoch + 1);
    return;
  }
  std::string path = path_;
  const std::string key = "{epoch}";
  for (size_t at = path.find(key); at != std::string::npos; at = path.find(key)) {
    path.replace(at, key.size(), std::to_string(logs.epoch + 1));
  }
  // Every worker takes part in both (the outcome of the writer's work is broadcast).
  internal::RunOnWriter(state.strategy, "create the directory of '" + path + "'", [&] {
    CreateDirectoryFor(path);
    return std::string();
  });
  checkpoint.Save(path);
  last_saved_ = path;
}

// ---- BackupAndRestore

BackupAndRestore::BackupAndRestore(std::string backup_dir, BackupOptions options)
    : backup_dir_(std::move(backup_dir)), options_(std::move(options)) {
  if (backup_dir_.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "BackupAndRestore: the backup directory is empty");
  }
}

void BackupAndRestore::on_train_begin(FitState& state) {
  if (state.optimizer == nullptr) {
    throw Error(CHORUS_UNSUPPORTED,
                "BackupAndRestore needs the optimizer's state in this process; under parameter "
                "servers it lives on the ps tasks: save it with ShardedCheckpoint and restart "
                "the ps tasks and the chief from it");
  }
  // The epoch is a variable of the fit's strategy, so it is saved and restored with the rest.
  VariableSpec spec;
  spec.name = "backup_and_restore/epoch";
  spec.trainable = false;
  epoch_ = Variable::Create(spec, {1}, {-1.0f});
  checkpoint_ = Checkpoint();
  TrackModelAndOptimizer(checkpoint_, state, true);
  checkpoint_.Track("backup_and_restore/epoch", epoch_);

  manager_.reset();  // a fit before this one's (its lock)
  CheckpointManagerOptions manager_options;
  manager_options.prefix = "backup";
  manager_options.max_to_keep = 1;
  manager_options.take_over = options_.take_over;
  manager_options.take_over_hint =
      options_.take_over_hint.empty() ? "BackupOptions::take_over" : options_.take_over_hint;
  manager_options.what = "backup directory";
  manager_ = std::make_unique<CheckpointManager>(
      backup_dir_,
      JobIdentity::Of(state.options->seed, state.model->trainable_variables(), state.strategy),
      state.strategy, manager_options);
  // Every worker gets the writer's view of the backup.
  const FoundCheckpoint backup = manager_->Latest();
  restored_epoch_ = -1;
  if (backup.path.empty()) return;
  checkpoint_.Restore(backup.path);
  const int saved = static_cast<int>(epoch_.value().ToVector().front());
  if (saved + 1 > state.options->epochs) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "BackupAndRestore: the backup '" + backup.path + "' was made after epoch " +
                    std::to_string(saved + 1) + ", but this fit has " +
                    std::to_string(state.options->epochs) +
                    " epochs: it is not this job's backup; give this job a backup directory of "
                    "its own (or remove this one)");
  }
  restored_epoch_ = saved + 1;
  state.initial_epoch = std::max(state.initial_epoch, restored_epoch_);
  if (state.chief) {
    std::printf("BackupAndRestore: restored %s; resuming at epoch %d of %d\n", backup.path.c_str(),
                restored_epoch_ + 1, state.options->epochs);
    std::fflush(stdout);
  }
}

void BackupAndRestore::on_epoch_end(FitState& state, const EpochLogs& logs) {
  (void)state;
  epoch_.assign(Tensor::FromVector(epoch_.components().front().device(), {1},
                                   {static_cast<float>(logs.epoch)}));
  manager_->Save(checkpoint_, logs.epoch + 1);
}

void BackupAndRestore::on_train_end(FitState& state, const History& history) {
  (void)history;
  if (!state.stop_training) manager_->DeleteAll();  // the job is done: a new one starts afresh
  manager_.reset();
}

}  // namespace chorus
