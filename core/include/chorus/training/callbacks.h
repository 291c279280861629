// fit()'s callbacks (tf.keras.callbacks): the progress bar, ModelCheckpoint and BackupAndRestore.
// Every worker of a multi-worker job runs the same callbacks at the same points; those that save
// make every worker take part (reading SyncOnRead values is a collective), the chief alone writes
// files, and every worker learns at once whether it could (a failed write stops every worker with
// an error that names the chief and its reason).
#ifndef CHORUS_CALLBACKS_H_
#define CHORUS_CALLBACKS_H_

#include <chorus/training/checkpoint.h>
#include <chorus/training/checkpoint_manager.h>
#include <chorus/training/fit.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

namespace chorus {

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(FitState& state) { (void)state; }
  virtual void on_epoch_begin(FitState& state) { (void)state; }
  // After `step` steps of the epoch (from 1), every FitOptions::log_every_steps steps but the
  // last of the epoch: the epoch's mean loss and accuracy so far.
  virtual void on_train_batch_end(FitState& state, int64_t step, double loss, double accuracy) {
    (void)state, (void)step, (void)loss, (void)accuracy;
  }
  virtual void on_epoch_end(FitState& state, const EpochLogs& logs) { (void)state, (void)logs; }
  virtual void on_train_end(FitState& state, const History& history) { (void)state, (void)history; }
};

// Keras' progress bar. On a terminal: one bar per epoch, redrawn at every log point
// ("1200/3750 [=========>....................] - ETA: 41s - loss: 0.4120 - accuracy: 0.8512"),
// finished with the epoch's figures. Not on a terminal (a file, a pipe, a worker's log under
// chorus-launch): one plain line per epoch, as Keras' verbose=2. Every worker prints (chorus-launch
// prefixes each worker's lines with its name).
class ProgressBar : public Callback {
 public:
  enum class Mode { kAuto, kBar, kLines };
  explicit ProgressBar(Mode mode = Mode::kAuto, std::FILE* out = stdout);

  void on_train_begin(FitState& state) override;
  void on_epoch_begin(FitState& state) override;
  void on_train_batch_end(FitState& state, int64_t step, double loss, double accuracy) override;
  void on_epoch_end(FitState& state, const EpochLogs& logs) override;

 private:
  bool bar_ = false;
  std::FILE* out_;
  Mode mode_;
  std::chrono::steady_clock::time_point epoch_start_;
};

// Saves the model's variables (and the optimizer's state unless weights_only) after every
// epoch. The files are chorus::Checkpoint files: restorable under any strategy or none.
class ModelCheckpoint : public Callback {
 public:
  // To `path`, where "{epoch}" becomes the epoch number from 1 (Keras' filepath); the writer
  // creates its directory.
  explicit ModelCheckpoint(std::string path, bool weights_only = false);
  // Through `manager` (which must outlive the callback, and be of the fit's strategy): the
  // checkpoint of epoch e (from 0) is <prefix>-<e + 1> in its directory, recorded in its index.
  explicit ModelCheckpoint(CheckpointManager& manager, bool weights_only = false);
  void on_epoch_end(FitState& state, const EpochLogs& logs) override;
  // The file of the last save ("" before the first).
  const std::string& last_saved() const { return last_saved_; }

 private:
  std::string path_;
  CheckpointManager* manager_ = nullptr;
  bool weights_only_;
  std::string last_saved_;
};

struct BackupOptions {
  // Use a backup directory that another job's backups are in (CheckpointManagerOptions::
  // take_over): this job then resumes from them.
  bool take_over = false;
  // How the user sets take_over, for the refusal's message (a flag such as
  // "--backup-dir-takeover").
  std::string take_over_hint;
};

// tf.keras.callbacks.BackupAndRestore: after every epoch the model, the optimizer and the epoch
// are saved to `backup_dir`; a job that starts and finds a backup restores it and resumes at the
// epoch after it, so a multi-worker job restarted after a worker died goes on from its last
// complete epoch instead of the first. A fit that completes deletes the backup. The directory is
// kept by a CheckpointManager (backup-<epochs done> and its index, the newest kept) for the job
// of this fit: JobIdentity::Of(FitOptions::seed, the model's trainable variables, the strategy).
// Another job's backup directory is refused unless BackupOptions::take_over; a backup of more
// epochs than the fit has is refused too. The writer's view of the backup is broadcast, so every
// worker resumes at the same epoch.
class BackupAndRestore : public Callback {
 public:
  explicit BackupAndRestore(std::string backup_dir, BackupOptions options = {});
  void on_train_begin(FitState& state) override;
  void on_epoch_end(FitState& state, const EpochLogs& logs) override;
  void on_train_end(FitState& state, const History& history) override;
  // The epoch (from 0) the last fit resumed at; -1 when it found no backup.
  int restored_epoch() const { return restored_epoch_; }

 private:
  std::string backup_dir_;
  BackupOptions options_;
  std::unique_ptr<CheckpointManager> manager_;  // from on_train_begin
  Checkpoint checkpoint_;
  Variable epoch_;
  int restored_epoch_ = -1;
};

// Calls `fn` at the end of every epoch (Keras' LambdaCallback(on_epoch_end=...)).
class EpochEndCallback : public Callback {
 public:
  explicit EpochEndCallback(std::function<void(FitState&, const EpochLogs&)> fn)
      : fn_(std::move(fn)) {}
  void on_epoch_end(FitState& state, const EpochLogs& logs) override { fn_(state, logs); }

 private:
  std::function<void(FitState&, const EpochLogs&)> fn_;
};

}  // namespace chorus

#endif  // CHORUS_CALLBACKS_H_
