#include <chorus/base/error.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/callbacks.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

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

void ModelCheckpoint::on_epoch_end(FitState& state, const EpochLogs& logs) {
  std::string path = path_;
  const std::string key = "{epoch}";
  for (size_t at = path.find(key); at != std::string::npos; at = path.find(key)) {
    path.replace(at, key.size(), std::to_string(logs.epoch + 1));
  }
  Checkpoint checkpoint;
  TrackModelAndOptimizer(checkpoint, state, !weights_only_);
  if (state.chief) CreateDirectoryFor(path);
  checkpoint.Save(path);  // every worker takes part; the chief writes
  last_saved_ = path;
}

// ---- BackupAndRestore

BackupAndRestore::BackupAndRestore(std::string backup_dir) : backup_dir_(std::move(backup_dir)) {
  if (backup_dir_.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "BackupAndRestore: the backup directory is empty");
  }
}

std::string BackupAndRestore::BackupFile() const {
  return (std::filesystem::path(backup_dir_) / "backup").string();
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

  // Every worker must agree on whether there is a backup: the chief's view decides.
  std::error_code error;
  float found = state.chief && std::filesystem::is_regular_file(BackupFile(), error) ? 1.0f : 0.0f;
  if (state.strategy != nullptr && state.strategy->num_workers() > 1) {
    const Device& device = state.strategy->devices().front();
    found = state.strategy->BroadcastFromLeader(Tensor::FromVector(device, {1}, {found}))
                .ToVector()
                .front();
  }
  restored_epoch_ = -1;
  if (found == 0.0f) return;
  checkpoint_.Restore(BackupFile());
  const int saved = static_cast<int>(epoch_.value().ToVector().front());
  restored_epoch_ = saved + 1;
  state.initial_epoch = std::max(state.initial_epoch, restored_epoch_);
  if (state.chief) {
    std::printf("BackupAndRestore: restored %s; resuming at epoch %d of %d\n", BackupFile().c_str(),
                restored_epoch_ + 1, state.options->epochs);
    std::fflush(stdout);
  }
}

void BackupAndRestore::on_epoch_end(FitState& state, const EpochLogs& logs) {
  epoch_.assign(Tensor::FromVector(epoch_.components().front().device(), {1},
                                   {static_cast<float>(logs.epoch)}));
  if (state.chief) CreateDirectoryFor(BackupFile());
  checkpoint_.Save(BackupFile());
}

void BackupAndRestore::on_train_end(FitState& state, const History& history) {
  (void)history;
  if (!state.chief || state.stop_training) return;
  std::error_code error;
  std::filesystem::remove(BackupFile(), error);  // the job is done: a new one starts afresh
}

}  // namespace chorus
