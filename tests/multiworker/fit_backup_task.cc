// One worker of the BackupAndRestore test: fit() of a softmax regression under
// MultiWorkerMirroredStrategy (TF_CONFIG from chorus-launch) with BackupAndRestore.
//   chorus_fit_backup_task BACKUP_DIR EPOCHS KILL_AT_EPOCH WEIGHTS_FILE
// KILL_AT_EPOCH >= 0: worker 1 kills itself (SIGKILL) when that epoch (from 0) begins.
// The chief prints "epochs run: ..." and writes the final kernel to WEIGHTS_FILE (raw f32).
#include <chorus/chorus.h>
#include <signal.h>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s BACKUP_DIR EPOCHS KILL_AT_EPOCH WEIGHTS_FILE\n", argv[0]);
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
