// The parameter-server promise end to end: `chorus-launch --ps 2 --workers 2 --evaluator` of the
// fashion_mnist example under ParameterServerStrategy trains asynchronously, the chief prints the
// tutorial's per-epoch lines and saves checkpoints, the evaluator task evaluates the last one
// with the same figures, every task exits 0, the final weights reach the accuracy of
// MirroredStrategy on the same data and epochs within a few points (a short run), and a rerun
// with --resume starts from the last checkpoint's step, even when the index beside it is empty
// (as a full disk left it).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace {

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after `label` in the last line that starts with `prefix`, -1 when none does.
double LastFigure(const std::string& log, const std::string& prefix, const std::string& label) {
  double figure = -1;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(label);
    if (line.rfind(prefix, 0) == 0 && at != std::string::npos) {
      figure = std::stod(line.substr(at + label.size()));
    }
  }
  return figure;
}

// An epoch line's "Test Accuracy: X" and its training "Loss: X" ("Epoch N, Loss: X, ...").
double LastTestAccuracy(const std::string& log, const std::string& prefix) {
  return LastFigure(log, prefix, "Test Accuracy: ");
}
double LastTrainingLoss(const std::string& log, const std::string& prefix) {
  return LastFigure(log, prefix, ", Loss: ");
}

TEST(ParameterServerExample, TrainsUnderChorusLaunchWithAnEvaluator) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_ps_example_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string common =
      " --synthetic --epochs 2 --global-batch 64 --train-examples 6400 --test-examples 1000"
      " --seed 3 --model mlp --loop custom";
  const std::string ps =
      std::string(CHORUS_LAUNCH) + " --ps 2 --workers 2 --evaluator --timeout 120 -- " +
      CHORUS_FASHION_MNIST + " --strategy parameter_server" + common + " --checkpoint-dir " +
      (dir / "ckpt_ps").string() + " > " + (dir / "ps.log").string() + " 2>&1";
  ASSERT_EQ(std::system(ps.c_str()), 0) << ReadAll(dir / "ps.log");
  const std::string log = ReadAll(dir / "ps.log");
  EXPECT_NE(log.find("[chief 0] Epoch 1, Loss: "), std::string::npos) << log;
  EXPECT_NE(log.find("[chief 0] Epoch 2, Loss: "), std::string::npos) << log;
  // The evaluator evaluated the chief's last checkpoint and found what the chief found.
  const double chief = LastTestAccuracy(log, "[chief 0] Epoch 2");
  const double evaluator = LastTestAccuracy(log, "[evaluator 0] Evaluator: ");
  EXPECT_GT(chief, 0) << log;
  EXPECT_EQ(chief, evaluator) << log;
  EXPECT_NE(log.find("ckpt-2: Test Loss"), std::string::npos) << log;
  EXPECT_EQ(log.find("died"), std::string::npos) << log;

  // The recovery from a ps failure: the job restarted from the last checkpoint resumes at its
  // step (2 epochs of 100 steps) and trains the third epoch only. The index is emptied first, as
  // a disk that filled up right after the checkpoint left it: the restore finds ckpt-2 anyway,
  // and says how.
  std::ofstream(dir / "ckpt_ps" / "checkpoint", std::ios::trunc).close();
  const std::string resumed =
      std::string(CHORUS_LAUNCH) + " --ps 2 --workers 2 --timeout 120 -- " + CHORUS_FASHION_MNIST +
      " --strategy parameter_server --resume" +
      " --model mlp --loop custom --synthetic --epochs 3 --global-batch 64 --train-examples 6400" +
      " --test-examples 1000 --seed 3 --checkpoint-dir " + (dir / "ckpt_ps").string() + " > " +
      (dir / "resumed.log").string() + " 2>&1";
  ASSERT_EQ(std::system(resumed.c_str()), 0) << ReadAll(dir / "resumed.log");
  const std::string resumed_log = ReadAll(dir / "resumed.log");
  EXPECT_NE(resumed_log.find("ckpt-2 at step 200: epoch 3"), std::string::npos) << resumed_log;
  EXPECT_NE(resumed_log.find("checkpoint' is empty; using ckpt-2, the newest whole checkpoint"),
            std::string::npos)
      << resumed_log;
  EXPECT_NE(resumed_log.find("[chief 0] Epoch 3, Loss: "), std::string::npos) << resumed_log;
  EXPECT_EQ(resumed_log.find("[chief 0] Epoch 1, "), std::string::npos) << resumed_log;
  // Started from the checkpoint's weights, not from new ones: the resumed epoch's mean training
  // loss is far below the first epoch's, which starts from the initial weights (0.71 against
  // 0.24-0.25 in runs of 2026-11-25). Test accuracy tells the two apart poorly here (the first
  // epoch already ends near 88.6%) and moves 3 points between epochs of asynchronous training
  // (under ASan: 90.7 after epoch 2, 87.4 after the resumed epoch 3), so it is only bounded.
  const double first_epoch_loss = LastTrainingLoss(log, "[chief 0] Epoch 1");
  const double resumed_loss = LastTrainingLoss(resumed_log, "[chief 0] Epoch 3");
  EXPECT_GT(first_epoch_loss, 0) << log;
  EXPECT_GT(resumed_loss, 0) << resumed_log;  // -1 (no such line) must not pass the next check
  EXPECT_LT(resumed_loss, 0.6 * first_epoch_loss) << log << resumed_log;
  EXPECT_GT(LastTestAccuracy(resumed_log, "[chief 0] Epoch 3"), chief - 5.0) << resumed_log;

  const std::string mirrored = std::string(CHORUS_FASHION_MNIST) +
                               " --strategy mirrored --replicas 2" + common + " --checkpoint-dir " +
                               (dir / "ckpt_mirrored").string() + " > " +
                               (dir / "mirrored.log").string() + " 2>&1";
  ASSERT_EQ(std::system(mirrored.c_str()), 0) << ReadAll(dir / "mirrored.log");
  const double synchronous = LastTestAccuracy(ReadAll(dir / "mirrored.log"), "Epoch 2");
  // Asynchronous steps on stale weights: close to, not equal to, the synchronous result.
  EXPECT_NEAR(chief, synchronous, 3.0) << log;
  std::filesystem::remove_all(dir);
}

// --loop fit (the default): chorus::FitWithParameterServers trains the CNN on the workers, the
// chief prints the progress and the tutorial's lines, and the evaluator follows the weights.
TEST(ParameterServerExample, FitTrainsTheCnnOnTheWorkersWithAnEvaluator) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_ps_fit_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string job =
      std::string(CHORUS_LAUNCH) + " --ps 2 --workers 2 --evaluator --timeout 120 -- " +
      CHORUS_FASHION_MNIST +
      " --strategy parameter_server --synthetic --epochs 2 --train-examples 3200"
      " --test-examples 500 --progress lines --checkpoint-dir " +
      (dir / "ckpt").string() + " > " + (dir / "fit.log").string() + " 2>&1";
  ASSERT_EQ(std::system(job.c_str()), 0) << ReadAll(dir / "fit.log");
  const std::string log = ReadAll(dir / "fit.log");
  EXPECT_NE(log.find("Loop: fit (FitWithParameterServers); model: cnn"), std::string::npos) << log;
  EXPECT_NE(log.find("[chief 0] Epoch 2/2\n"), std::string::npos) << log;
  EXPECT_NE(log.find("[chief 0] 50/50 - "), std::string::npos) << log;
  const double chief = LastTestAccuracy(log, "[chief 0] Epoch 2,");
  EXPECT_GT(chief, 20) << log;  // better than chance after 100 steps
  EXPECT_EQ(chief, LastTestAccuracy(log, "[evaluator 0] Evaluator: ")) << log;
  EXPECT_EQ(chief, LastTestAccuracy(log, "[chief 0] Restored ")) << log;
  EXPECT_EQ(log.find("died"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

// Preemption of the chief (what Slurm, Kubernetes and chorus-launch --timeout send) while the
// coordinator's threads run: it ends by its SIGTERM, and the launcher says so. Every plugin of
// the build is loaded (libfabric's psm provider, which the ofi plugin loads, installed a SIGTERM
// handler that called exit(): the chief then ended with 1, or crashed in the registry's
// destructor under its own threads).
TEST(ParameterServerExample, APreemptedChiefEndsByItsSigterm) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_ps_term_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string log_file = (dir / "ps.log").string();
  // The chief prints its pid, then trains until it is stopped.
  const std::string job =
      "cd " + dir.string() + " && " + std::string(CHORUS_LAUNCH) +
      " --ps 2 --workers 2 --timeout 120 -- sh -c '" +
      "case \"$TF_CONFIG\" in *\\\"type\\\":\\\"chief\\\"*) echo $$ > chief.pid;; esac; exec " +
      CHORUS_FASHION_MNIST +
      " --strategy parameter_server --synthetic --epochs 1000 --model mlp --loop custom"
      " --train-examples 6400 --test-examples 100 --checkpoint-dir " +
      (dir / "ckpt").string() + "' > " + log_file + " 2>&1 &";
  ASSERT_EQ(std::system(job.c_str()), 0);
  // Until the chief trains (its first epoch line), then SIGTERM to it alone.
  std::string log;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         (log = ReadAll(log_file)).find("[chief 0] Epoch 1, Loss: ") == std::string::npos) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(log.find("[chief 0] Epoch 1, Loss: "), std::string::npos) << log;
  const pid_t chief = std::stoi(ReadAll(dir / "chief.pid"));
  ASSERT_EQ(kill(chief, SIGTERM), 0);
  while (std::chrono::steady_clock::now() < deadline &&
         (log = ReadAll(log_file)).find("chorus-launch: chief 0 exited") == std::string::npos) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(log.find("chorus-launch: chief 0 exited with code 143 (killed by SIGTERM: "
                     "Terminated)"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("Segmentation"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
