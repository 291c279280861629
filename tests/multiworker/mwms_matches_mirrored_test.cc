// The multi-worker promise: `chorus-launch -n 2` of the fashion_mnist example (chorus::Fit of the
// MLP on generated data), 2 virtual cpu devices per worker under MultiWorkerMirroredStrategy,
// ends with the weights MirroredStrategy with 4 replicas in one process reaches (max relative
// difference 1e-5, per tensor against its largest element, as tests/integration measures it);
// and with 2 devices of chorus's reference PJRT plugin per worker instead, the very same bits
// (the local reduce through the pjrt enumerator's kernels, then across the workers).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "chorus-launch/ports.h"

namespace {

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) {
      bits |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[4 * i + b])) << (8 * b);
    }
    std::memcpy(&values[i], &bits, 4);
  }
  return values;
}

int RunCommand(const std::string& command) { return std::system(command.c_str()); }

// Trains Mirrored(4) on cpu devices with `common`'s flags in `dir` and expects its weights to be
// the very bits of those at `weights` (what `who` trained).
void ExpectTheWeightsOfMirroredWithFour(const std::filesystem::path& dir, const std::string& common,
                                        const std::filesystem::path& weights,
                                        const std::string& who) {
  const std::string mirrored =
      std::string(CHORUS_FASHION_MNIST) + " --strategy mirrored --replicas 4" + common +
      " --checkpoint-dir " + (dir / "ckpt_mirrored").string() + " --save-weights " +
      (dir / "mirrored.bin").string() + " > " + (dir / "mirrored.log").string() + " 2>&1";
  ASSERT_EQ(RunCommand(mirrored), 0) << std::ifstream(dir / "mirrored.log").rdbuf();
  const std::vector<float> a = ReadFloats(weights.string());
  const std::vector<float> b = ReadFloats((dir / "mirrored.bin").string());
  ASSERT_EQ(a.size(), 101770u);
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << who << " and Mirrored(4) on cpu devices ended with different weights";
}

TEST(MultiWorkerMirrored, TwoWorkersOfTwoDevicesMatchMirroredWithFour) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_mwms_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string common =
      " --synthetic --model mlp --progress lines --replicas 2 --epochs 1 --steps 50"
      " --global-batch 64 --train-examples 3200 --test-examples 128 --seed 3";
  const std::string mwms = std::string(CHORUS_LAUNCH) + " -n 2 --timeout 240 -- " +
                           CHORUS_FASHION_MNIST + " --strategy multi_worker_mirrored" + common +
                           " --checkpoint-dir " + (dir / "ckpt_mwms").string() +
                           " --save-weights " + (dir / "mwms.bin").string() + " > " +
                           (dir / "mwms.log").string() + " 2>&1";
  ASSERT_EQ(RunCommand(mwms), 0) << std::ifstream(dir / "mwms.log").rdbuf();
  const std::string mirrored = std::string(CHORUS_FASHION_MNIST) +
                               " --strategy mirrored --replicas 4 --synthetic --model mlp"
                               " --progress lines --epochs 1 --steps 50"
                               " --global-batch 64 --train-examples 3200 --test-examples 128"
                               " --seed 3 --checkpoint-dir " +
                               (dir / "ckpt_mirrored").string() + " --save-weights " +
                               (dir / "mirrored.bin").string() + " > " +
                               (dir / "mirrored.log").string() + " 2>&1";
  ASSERT_EQ(RunCommand(mirrored), 0) << std::ifstream(dir / "mirrored.log").rdbuf();

  const std::vector<float> a = ReadFloats((dir / "mwms.bin").string());
  const std::vector<float> b = ReadFloats((dir / "mirrored.bin").string());
  const std::vector<size_t> parts = {784 * 128, 128, 128 * 10, 10};
  ASSERT_EQ(a.size(), 101770u);
  ASSERT_EQ(b.size(), a.size());
  size_t offset = 0;
  double worst = 0;
  for (size_t part : parts) {
    double difference = 0, scale = 0;
    for (size_t i = offset; i < offset + part; ++i) {
      difference = std::max(difference, std::fabs(static_cast<double>(a[i]) - b[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    }
    worst = std::max(worst, difference / scale);
    offset += part;
  }
  std::printf("MultiWorkerMirrored(2x2) vs Mirrored(4): max relative difference %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
  std::ifstream log(dir / "mwms.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("[worker 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("worker 0 of 2"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

TEST(MultiWorkerMirrored, TwoWorkersOfTwoPjrtDevicesTrainToTheBitsOfMirroredWithFour) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_mwms_pjrt_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string common =
      " --synthetic --model mlp --progress lines --epochs 1 --steps 20 --global-batch 64"
      " --train-examples 1280 --test-examples 128 --seed 3";
  const std::string mwms =
      "CHORUS_PJRT_PLUGIN=reference CHORUS_PJRT_OPTIONS=device_count=2 " +
      std::string(CHORUS_LAUNCH) + " -n 2 --timeout 240 -- " + CHORUS_FASHION_MNIST +
      " --strategy multi_worker_mirrored --devices pjrt" + common + " --checkpoint-dir " +
      (dir / "ckpt_mwms").string() + " --save-weights " + (dir / "mwms.bin").string() + " > " +
      (dir / "mwms.log").string() + " 2>&1";
  ASSERT_EQ(RunCommand(mwms), 0) << std::ifstream(dir / "mwms.log").rdbuf();
  ExpectTheWeightsOfMirroredWithFour(dir, common, dir / "mwms.bin", "2 workers x 2 PJRT devices");
  std::ifstream log(dir / "mwms.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("PJRT:1 (reference"), std::string::npos) << text;
  EXPECT_NE(text.find("worker 0 of 2"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

// TPUStrategy over a TPU system of two hosts, one process each with two reference PJRT devices,
// as a TPU VM's slice describes itself (TPU_WORKER_HOSTNAMES, TPU_WORKER_ID): within a host the
// tpu plugin's compiled programs sum the replicas, across hosts the collective AUTO picks; the
// weights are those of Mirrored(4).
TEST(TPUStrategy, TwoHostsOfTwoPjrtDevicesTrainToTheBitsOfMirroredWithFour) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_tpu_hosts_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<int> ports = chorus::launch::PickFreePorts(2);
  const std::string common =
      " --synthetic --model mlp --progress lines --epochs 1 --steps 20 --global-batch 64"
      " --train-examples 1280 --test-examples 128 --seed 3";
  const std::string host =
      "CHORUS_PJRT_PLUGIN=reference CHORUS_PJRT_OPTIONS=device_count=2 "
      "CHORUS_TIMEOUT_SECONDS=120 TPU_WORKER_HOSTNAMES=127.0.0.1:" +
      std::to_string(ports[0]) + ",127.0.0.1:" + std::to_string(ports[1]) + " ";
  auto worker = [&](int id) {
    return host + "TPU_WORKER_ID=" + std::to_string(id) + " " + CHORUS_FASHION_MNIST +
           " --strategy tpu" + common + " --checkpoint-dir " +
           (dir / ("ckpt_" + std::to_string(id))).string() + " --save-weights " +
           (dir / "tpu.bin").string() + " > " +
           (dir / ("tpu_" + std::to_string(id) + ".log")).string() + " 2>&1";
  };
  // Host 1 in the background, host 0 (the leader) in front; the exit status is both's.
  const std::string both = "(" + worker(1) + ") & other=$!; " + worker(0) +
                           "; first=$?; wait $other; exit $((first | $?))";
  const int status = RunCommand("bash -c '" + both + "'");
  ASSERT_EQ(status, 0) << std::ifstream(dir / "tpu_0.log").rdbuf() << "\n--- host 1:\n"
                       << std::ifstream(dir / "tpu_1.log").rdbuf();
  ExpectTheWeightsOfMirroredWithFour(dir, common, dir / "tpu.bin",
                                     "TPUStrategy on 2 hosts x 2 PJRT devices");
  std::ifstream log(dir / "tpu_0.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Strategy: TPUStrategy, replicas: 4"), std::string::npos) << text;
  EXPECT_NE(text.find("cross-device ops: tpu"), std::string::npos) << text;
  EXPECT_NE(text.find("worker 0 of 2"), std::string::npos) << text;
  // Each host's PJRT client is one process of two: the clients met through the job's store
  // (the reference plugin refuses num_nodes 2 without the key-value callbacks), each sees the
  // job's four devices, and both name the same job.
  std::ifstream other_log(dir / "tpu_1.log");
  const std::string other((std::istreambuf_iterator<char>(other_log)),
                          std::istreambuf_iterator<char>());
  const auto job_of = [](const std::string& log, const std::string& process) {
    const std::string mark = "process " + process + " of 2 (job ";
    const size_t at = log.find(mark);
    if (at == std::string::npos) return std::string();
    const size_t start = at + mark.size();
    return log.substr(start, log.find(')', start) - start);
  };
  const std::string job = job_of(text, "0");
  EXPECT_FALSE(job.empty()) << text;
  EXPECT_EQ(job_of(other, "1"), job) << other;
  EXPECT_NE(text.find("4 devices in the job"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

// The PJRT clients of a TPU system of two hosts meet through the job's store, which admits only
// holders of the job's secret: a host without it is refused at once, and the leader's client,
// whose peer never came, ends within the job's time-out naming the key it waited for.
TEST(TPUStrategy, AHostWithoutTheJobSecretNeverMeetsTheOtherHostsPjrtClient) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_tpu_secret_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<int> ports = chorus::launch::PickFreePorts(2);
  const std::string host =
      "CHORUS_PJRT_PLUGIN=reference CHORUS_PJRT_OPTIONS=device_count=2 "
      "CHORUS_TIMEOUT_SECONDS=4 TPU_WORKER_HOSTNAMES=127.0.0.1:" +
      std::to_string(ports[0]) + ",127.0.0.1:" + std::to_string(ports[1]) + " ";
  auto worker = [&](int id, const std::string& secret) {
    return host + (secret.empty() ? "" : "CHORUS_JOB_SECRET=" + secret + " ") +
           "TPU_WORKER_ID=" + std::to_string(id) + " " + CHORUS_FASHION_MNIST +
           " --synthetic --strategy tpu --epochs 1 --steps 2 > " +
           (dir / ("tpu_" + std::to_string(id) + ".log")).string() + " 2>&1";
  };
  const std::string both = "(" + worker(1, "") + ") & other=$!; " +
                           worker(0, "tpu-secret-test-0123456789abcdef") +
                           "; first=$?; wait $other; second=$?; "
                           "test $first -ne 0 && test $second -ne 0";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunCommand("bash -c '" + both + "'"), 0) << "both hosts must fail";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  std::ifstream leader_log(dir / "tpu_0.log"), other_log(dir / "tpu_1.log");
  const std::string leader((std::istreambuf_iterator<char>(leader_log)),
                           std::istreambuf_iterator<char>());
  const std::string other((std::istreambuf_iterator<char>(other_log)),
                          std::istreambuf_iterator<char>());
  EXPECT_NE(other.find("admits only holders of the job's secret"), std::string::npos) << other;
  EXPECT_NE(leader.find("InitializeTpuSystem"), std::string::npos) << leader;
  EXPECT_NE(leader.find("reference_pjrt/devices/1"), std::string::npos) << leader;
  std::filesystem::remove_all(dir);
}

}  // namespace
