// One worker of the BackupAndRestore test: fit() of a softmax regression under
// MultiWorkerMirroredStrategy (TF_CONFIG from chorus-launch) with BackupAndRestore.
//   chorus_fit_backup_task BACKUP_DIR EPOCHS KILL_AT_EPOCH WEIGHTS_FILE [WRITER_FILE_LIMIT]
// KILL_AT_EPOCH >= 0: worker 1 kills itself (SIGKILL) when that epoch (from 0) begins.
// WRITER_FILE_LIMIT: once the backup directory is claimed, the writer (worker 0) may write no
// file larger than this many bytes (RLIMIT_FSIZE; writes fail with EFBIG as a full disk's fail
// with ENOSPC, for root too), so its first backup fails.
// The chief prints "epochs run: ..." and writes the final kernel to WEIGHTS_FILE (raw f32).
#include <chorus/chorus.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "../support/linear_softmax_model.h"

namespace {

struct KillAtEpoch : chorus::Callback {
  int epoch;
  explicit KillAtEpoch(int e) : epoch(e) {}
  void on_epoch_begin(chorus::FitState& state) override {
    if (state.epoch != epoch) return;
    // A collective first: the chief has then finished the last epoch's callbacks (its backup).
    const chorus::Device& device = state.strategy->devices().front();
    state.strategy->BroadcastFromLeader(chorus::Tensor::FromVector(device, {1}, {0.0f}));
    if (state.strategy->worker_id() == 1) raise(SIGKILL);
  }
};

// After BackupAndRestore's on_train_begin (the claim of its directory), limits the writer's files.
struct LimitWriterFiles : chorus::Callback {
  rlim_t bytes;
  explicit LimitWriterFiles(rlim_t b) : bytes(b) {}
  void on_train_begin(chorus::FitState& state) override {
    if (!state.chief) return;
    signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
    rlimit limit{};
    getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr,
                 "usage: %s BACKUP_DIR EPOCHS KILL_AT_EPOCH WEIGHTS_FILE [WRITER_FILE_LIMIT]\n",
                 argv[0]);
    return 2;
  }
  try {
    chorus::MultiWorkerMirroredStrategy strategy;
    std::unique_ptr<chorus::testing::LinearSoftmaxModel> model;
    {
      const auto scope = strategy.scope();
      model = std::make_unique<chorus::testing::LinearSoftmaxModel>(6, 4, 1e-3f);
    }
    const chorus::Dataset data = chorus::testing::SeparableData(240, 6, 4, 11);
    chorus::Adam adam(0.05f);
    chorus::BackupAndRestore backup(argv[1]);
    KillAtEpoch kill(std::stoi(argv[3]));
    chorus::ProgressBar progress;
    chorus::FitOptions options;
    options.batch_size = 16;
    options.epochs = std::stoi(argv[2]);
    options.callbacks = {&backup, &kill, &progress};
    LimitWriterFiles limit(argc == 6 ? std::stoull(argv[5]) : RLIM_INFINITY);
    if (argc == 6) options.callbacks.push_back(&limit);
    const chorus::History history = chorus::Fit(&strategy, *model, adam, data, options);
    if (strategy.should_checkpoint()) {
      std::string epochs;
      for (const chorus::EpochLogs& logs : history.epochs)
        epochs += " " + std::to_string(logs.epoch);
      std::printf("epochs run:%s\n", epochs.c_str());
      const auto scope = strategy.scope();
      const std::vector<float> kernel = model->kernel().value().ToVector();
      std::ofstream(argv[4], std::ios::binary)
          .write(reinterpret_cast<const char*>(kernel.data()),
                 static_cast<std::streamsize>(kernel.size() * sizeof(float)));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus_fit_backup_task: %s\n", e.what());
    return 1;
  }
}
