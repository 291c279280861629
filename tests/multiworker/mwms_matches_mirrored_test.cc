// The multi-worker promise: `chorus-launch -n 2` of the fashion_mnist example (chorus::Fit of the
// MLP on generated data), 2 virtual cpu devices per worker under MultiWorkerMirroredStrategy,
// ends with the weights MirroredStrategy with 4 replicas in one process reaches (max relative
// difference 1e-5, per tensor against its largest element, as tests/integration measures it);
// and with 2 devices of chorus's reference PJRT plugin per worker instead, the very same bits
// (the local reduce through the pjrt enumerator's kernels, then across the workers).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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
  const std::string mirrored =
      std::string(CHORUS_FASHION_MNIST) + " --strategy mirrored --replicas 4" + common +
      " --checkpoint-dir " + (dir / "ckpt_mirrored").string() + " --save-weights " +
      (dir / "mirrored.bin").string() + " > " + (dir / "mirrored.log").string() + " 2>&1";
  ASSERT_EQ(RunCommand(mirrored), 0) << std::ifstream(dir / "mirrored.log").rdbuf();
  const std::vector<float> a = ReadFloats((dir / "mwms.bin").string());
  const std::vector<float> b = ReadFloats((dir / "mirrored.bin").string());
  ASSERT_EQ(a.size(), 101770u);
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << "2 workers x 2 PJRT devices and Mirrored(4) on cpu devices ended with different weights";
  std::ifstream log(dir / "mwms.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("PJRT:1 (reference"), std::string::npos) << text;
  EXPECT_NE(text.find("worker 0 of 2"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
