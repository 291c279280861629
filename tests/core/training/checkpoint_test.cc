// Checkpoints: round trips of variables, optimizer slots and iterations; restoring under another
// strategy (or none); the file format; and the errors for missing keys, wrong shapes, corrupt,
// truncated and foreign files.
#include <chorus/base/error.h>
#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>
#include <chorus/training/checkpoint.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "cpu_devices_for_tests.h"

namespace chorus {
namespace {

using test::CpuDevices;
using test::ExpectError;
using test::HostDevice;
using test::Values;

using test::MakeVariable;

// A non-trainable ON_READ variable summed across replicas (a metric's total).
Variable SumOnRead(const std::string& name, float value) {
  VariableSpec spec;
  spec.name = name;
  spec.trainable = false;
  spec.synchronization = VariableSynchronization::kOnRead;
  spec.aggregation = VariableAggregation::kSum;
  return Variable::Create(spec, {1}, {value});
}

std::vector<char> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
        std::filesystem::path(::testing::TempDir()) /
        ("chorus_checkpoint_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string Path(const std::string& name) const { return (directory_ / name).string(); }

  // A checkpoint of one variable "w" = [1, 2, 3].
  std::string SaveSmall() {
    const std::string path = Path("small.ckpt");
    Checkpoint().Track("w", MakeVariable("w", {1, 2, 3})).Save(path);
    return path;
  }

 private:
  std::filesystem::path directory_;
};

void TrainPlain(Optimizer& optimizer, const Variable& w, int steps) {
  for (int i = 0; i < steps; ++i) optimizer.apply_gradients({{Values({0.5f, -1, 2}), w}});
}

void ExpectSameSlots(const Optimizer& a, const Optimizer& b) {
  ASSERT_EQ(a.slots().size(), b.slots().size());
  for (const auto& [key, slot] : a.slots()) {
    ASSERT_EQ(b.slots().count(key), 1u) << key;
    EXPECT_EQ(b.slots().at(key).value().ToVector(), slot.value().ToVector()) << key;
  }
}

// ---- round trips ------------------------------------------------------------------------------

TEST_F(CheckpointTest, RoundTripRestoresVariablesSlotsAndIterations) {
  const std::string path = Path("model.ckpt");
  Variable w = MakeVariable("w", {1, 2, 3});
  Variable count = MakeVariable("count", {7}, false);
  Adam adam(0.1f);
  TrainPlain(adam, w, 2);
  Checkpoint().Track("w", w).Track("count", count).Track("opt", adam).Save(path);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  Variable w2 = MakeVariable("w", {0, 0, 0});
  Variable count2 = MakeVariable("count", {0}, false);
  Adam adam2(0.1f);
  Checkpoint().Track("w", w2).Track("count", count2).Track("opt", adam2).Restore(path);
  EXPECT_EQ(w2.value().ToVector(), w.value().ToVector());
  EXPECT_EQ(count2.value().ToVector(), std::vector<float>{7});
  EXPECT_EQ(adam2.iterations(), 2);
  ExpectSameSlots(adam, adam2);
  EXPECT_FALSE(adam2.slots().at("w/m").trainable());

  // Training on from the restored state is training on from the saved one.
  TrainPlain(adam, w, 1);
  TrainPlain(adam2, w2, 1);
  EXPECT_EQ(w2.value().ToVector(), w.value().ToVector());
}

TEST_F(CheckpointTest, SavedUnderMirroredRestoresWithoutStrategyAndUnderOneDevice) {
  const std::string path = Path("mirrored.ckpt");
  Variable w, total;
  Adam adam(0.1f);
  {
    MirroredStrategy mirrored(CpuDevices(4), "reduction_to_one_device");
    {
      auto scope = mirrored.scope();
      w = MakeVariable("w", {1, 2, 3});
      total = SumOnRead("total", 1);  // 1 in each of 4 copies: 4 across replicas
    }
    for (int step = 0; step < 2; ++step) {
      mirrored.run([&](ReplicaContext& ctx) {
        const float r = static_cast<float>(ctx.replica_id_in_sync_group());
        adam.apply_gradients({{Values({r, 1, -r}, ctx.device()), w}});
      });
    }
    auto scope = mirrored.scope();
    Checkpoint().Track("w", w).Track("total", total).Track("opt", adam).Save(path);
  }
  const std::vector<float> saved = w.components()[0].ToVector();

  Variable plain_w = MakeVariable("w", {0, 0, 0});
  Variable plain_total = MakeVariable("total", {0}, false);
  Adam plain_adam(0.1f);
  Checkpoint()
      .Track("w", plain_w)
      .Track("total", plain_total)
      .Track("opt", plain_adam)
      .Restore(path);
  EXPECT_EQ(plain_w.value().ToVector(), saved);
  EXPECT_EQ(plain_total.value().ToVector(), std::vector<float>{4});
  EXPECT_EQ(plain_adam.iterations(), 2);
  EXPECT_EQ(plain_adam.slots().at("w/m").value().ToVector(),
            adam.slots().at("w/m").components()[0].ToVector());

  OneDeviceStrategy one(CpuDevices(2)[1]);
  auto scope = one.scope();
  Variable one_w = MakeVariable("w", {0, 0, 0});
  Variable one_total = SumOnRead("total", 0);
  Adam one_adam(0.1f);
  Checkpoint().Track("w", one_w).Track("total", one_total).Track("opt", one_adam).Restore(path);
  EXPECT_EQ(one_w.value().ToVector(), saved);
  EXPECT_EQ(one_total.value().ToVector(), std::vector<float>{4});
  ExpectSameSlots(plain_adam, one_adam);
  EXPECT_EQ(one_adam.slots().at("w/v").components().front().device(), one.devices()[0]);
}

TEST_F(CheckpointTest, RestoreIntoMirroredSetsEveryCopy) {
  const std::string path = Path("plain.ckpt");
  Variable w = MakeVariable("w", {1, 2});
  Variable total = MakeVariable("total", {8}, false);
  SGD sgd(0.5f, 0.5f);
  sgd.apply_gradients({{Values({1, 1}), w}});
  Checkpoint().Track("w", w).Track("total", total).Track("opt", sgd).Save(path);

  MirroredStrategy mirrored(CpuDevices(4), "reduction_to_one_device");
  auto scope = mirrored.scope();
  Variable mw = MakeVariable("w", {0, 0});
  Variable mtotal = SumOnRead("total", 0);
  SGD msgd(0.5f, 0.5f);
  Checkpoint().Track("w", mw).Track("total", mtotal).Track("opt", msgd).Restore(path);
  for (const Tensor& copy : mw.components()) EXPECT_EQ(copy.ToVector(), w.value().ToVector());
  for (const Tensor& copy : mtotal.components()) EXPECT_EQ(copy.ToVector(), std::vector<float>{2});
  EXPECT_EQ(mtotal.value().ToVector(), std::vector<float>{8});
  const Variable& m = msgd.slots().at("w/momentum");
  ASSERT_EQ(m.components().size(), 4u);
  for (const Tensor& copy : m.components()) {
    EXPECT_EQ(copy.ToVector(), sgd.slots().at("w/momentum").value().ToVector());
  }
}

TEST_F(CheckpointTest, SlotsAbsentFromTheFileAreResetAndExtraKeysIgnored) {
  const std::string path = Path("early.ckpt");
  Variable w = MakeVariable("w", {1, 2, 3});
  Variable unused = MakeVariable("unused", {5});
  Adam adam(0.1f);
  Checkpoint().Track("w", w).Track("unused", unused).Track("opt", adam).Save(path);  // no slots
  TrainPlain(adam, w, 3);
  Checkpoint().Track("w", w).Track("opt", adam).Restore(path);
  EXPECT_EQ(w.value().ToVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(adam.iterations(), 0);
  EXPECT_EQ(adam.slots().at("w/m").value().ToVector(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(adam.slots().at("w/v").value().ToVector(), (std::vector<float>{0, 0, 0}));
}

TEST_F(CheckpointTest, FileLayoutIsAsDocumented) {
  const std::string path = Path("layout.ckpt");
  Checkpoint().Track("w", MakeVariable("w", {1.5f, -2})).Save(path);
  const std::vector<char> bytes = ReadBytes(path);
  // magic 12, count 8, key length 4, key 1, dtype 4, rank 4, dim 8, byte count 8, data 8,
  // checksum 8.
  ASSERT_EQ(bytes.size(), 65u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 12), "CHORUSCKPT1\n");
  EXPECT_EQ(bytes[12], 1);  // count
  EXPECT_EQ(bytes[20], 1);  // key length
  EXPECT_EQ(bytes[24], 'w');
  EXPECT_EQ(bytes[25], 0);  // CHORUS_F32
  EXPECT_EQ(bytes[29], 1);  // rank
  EXPECT_EQ(bytes[33], 2);  // dims[0]
  EXPECT_EQ(bytes[41], 8);  // byte count
  float first = 0;
  std::memcpy(&first, bytes.data() + 49, sizeof(float));
  EXPECT_EQ(first, 1.5f);
}

// ---- errors ---------------------------------------------------------------------------------

TEST_F(CheckpointTest, MissingKeyNamesItAndListsTheFile) {
  const std::string path = SaveSmall();
  Variable w = MakeVariable("w", {9, 9, 9});
  Variable b = MakeVariable("b", {9});
  ExpectError([&] { Checkpoint().Track("w", w).Track("b", b).Restore(path); }, CHORUS_NOT_FOUND,
              {"has no key 'b'", "it has 'w'", path});
  EXPECT_EQ(w.value().ToVector(), (std::vector<float>{9, 9, 9}));  // nothing assigned
  Adam adam;
  ExpectError([&] { Checkpoint().Track("w", w).Track("opt", adam).Restore(path); },
              CHORUS_NOT_FOUND, {"has no key 'opt/iterations'"});
}

TEST_F(CheckpointTest, WrongShapeNamesBothShapes) {
  const std::string path = SaveSmall();
  Variable w = MakeVariable("w", {9, 9});
  ExpectError([&] { Checkpoint().Track("w", w).Restore(path); }, CHORUS_INVALID_ARGUMENT,
              {"key 'w' holds f32[3] but the variable it restores is f32[2]"});
}

TEST_F(CheckpointTest, FlippedByteIsAChecksumMismatch) {
  const std::string path = SaveSmall();
  std::vector<char> bytes = ReadBytes(path);
  bytes[bytes.size() - 9] ^= 0x40;  // the last data byte
  WriteBytes(path, bytes);
  Variable w = MakeVariable("w", {9, 9, 9});
  ExpectError([&] { Checkpoint().Track("w", w).Restore(path); }, CHORUS_INVALID_ARGUMENT,
              {"checksum mismatch", path});
  EXPECT_EQ(w.value().ToVector(), (std::vector<float>{9, 9, 9}));
}

TEST_F(CheckpointTest, TruncatedFilesAreReportedAsTruncated) {
  const std::string path = SaveSmall();
  const std::vector<char> whole = ReadBytes(path);
  Variable w = MakeVariable("w", {9, 9, 9});
  for (size_t size : {size_t{5}, size_t{16}, whole.size() / 2, whole.size() - 3}) {
    WriteBytes(path, std::vector<char>(whole.begin(), whole.begin() + static_cast<long>(size)));
    ExpectError([&] { Checkpoint().Track("w", w).Restore(path); }, CHORUS_INVALID_ARGUMENT,
                {"truncated", path});
  }
}

TEST_F(CheckpointTest, ForeignAndMissingFiles) {
  const std::string path = Path("foreign.txt");
  WriteBytes(path, {'h', 'e', 'l', 'l', 'o', ',', ' ', 'w', 'o', 'r', 'l', 'd', '!', '\n'});
  Variable w = MakeVariable("w", {1});
  ExpectError([&] { Checkpoint().Track("w", w).Restore(path); }, CHORUS_INVALID_ARGUMENT,
              {"not a chorus checkpoint", path});
  ExpectError([&] { Checkpoint().Track("w", w).Restore(Path("absent.ckpt")); }, CHORUS_NOT_FOUND,
              {"cannot open", "absent.ckpt"});
}

TEST_F(CheckpointTest, SaveAndRestoreInsideRunAreErrors) {
  MirroredStrategy mirrored(CpuDevices(2), "reduction_to_one_device");
  Variable w;
  {
    auto scope = mirrored.scope();
    w = MakeVariable("w", {1});
  }
  Checkpoint checkpoint;
  checkpoint.Track("w", w);
  const std::string path = Path("inside.ckpt");
  ExpectError([&] { mirrored.run([&](ReplicaContext&) { checkpoint.Save(path); }); },
              CHORUS_INVALID_ARGUMENT, {"cross-replica context", "Save"});
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(CheckpointTest, TrackingTheSameKeyTwiceIsAnError) {
  Checkpoint checkpoint;
  checkpoint.Track("w", MakeVariable("w", {1}));
  ExpectError([&] { checkpoint.Track("w", MakeVariable("w2", {1})); }, CHORUS_INVALID_ARGUMENT,
              {"key 'w' is tracked twice"});
}

}  // namespace
}  // namespace chorus
