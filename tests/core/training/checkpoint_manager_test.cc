// CheckpointManager: numbered checkpoints with the index written last; the latest whole
// checkpoint found when the index is missing, empty, unreadable or names a missing or truncated
// file (with a warning that says so); temporary names unique per writer; a directory owned by one
// job (another refused, the override accepted, the same job welcome) and locked by its writer;
// saves that fail (a directory that cannot exist, a file size limit, an index that cannot be
// written) with a clear error and the previous checkpoint kept.
#include <chorus/base/error.h>
#include <chorus/training/checkpoint.h>
#include <chorus/training/checkpoint_manager.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cpu_devices_for_tests.h"
#include "training/checkpoint_format.h"

namespace chorus {
namespace {

namespace fs = std::filesystem;
using test::ExpectError;

using test::MakeVariable;

JobIdentity Identity(uint64_t seed) {
  return JobIdentity{seed, ModelSignature({VariableSignature{"w", CHORUS_F32, {3}}}),
                     ClusterShape(nullptr)};
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class CheckpointManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(::testing::TempDir()) /
            ("chorus_manager_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    checkpoint_.Track("w", w_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Dir() const { return (root_ / "ckpt").string(); }
  fs::path File(const std::string& name) const { return root_ / "ckpt" / name; }

  // Saves ckpt-1 (w = 1, 1, 1) and ckpt-2 (w = 2, 2, 2) as the job of seed 1.
  void SaveTwo() {
    CheckpointManager manager(Dir(), Identity(1));
    w_.assign(Tensor::FromVector(w_.components().front().device(), {3}, {1, 1, 1}));
    manager.Save(checkpoint_, 1);
    w_.assign(Tensor::FromVector(w_.components().front().device(), {3}, {2, 2, 2}));
    manager.Save(checkpoint_, 2);
  }
  std::vector<float> Restored(const std::string& path) {
    Variable fresh = MakeVariable("w", {0, 0, 0});
    Checkpoint().Track("w", fresh).Restore(path);
    return fresh.value().ToVector();
  }
  // The files of the directory whose names hold ".tmp".
  std::vector<std::string> Temporaries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(root_ / "ckpt")) {
      const std::string name = entry.path().filename().string();
      if (name.find(".tmp") != std::string::npos) names.push_back(name);
    }
    return names;
  }
  void Truncate(const std::string& name) {
    const std::string bytes = ReadText(File(name));
    WriteText(File(name), bytes.substr(0, bytes.size() / 2));
  }

  fs::path root_;
  Variable w_ = MakeVariable("w", {0, 0, 0});
  Checkpoint checkpoint_;
};

TEST_F(CheckpointManagerTest, SavesNumberedFilesAndTheIndexLastWithNoTemporaryLeft) {
  SaveTwo();
  EXPECT_EQ(ReadText(File("checkpoint")), "model_checkpoint_path: \"ckpt-2\"\n");
  EXPECT_TRUE(fs::is_regular_file(File("ckpt-1")));
  EXPECT_NE(ReadText(File("owner")).find("seed: 1\n"), std::string::npos);
  EXPECT_TRUE(Temporaries().empty());
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-2").string());
  EXPECT_EQ(found.number, 2);
  EXPECT_EQ(found.warning, "");
  EXPECT_EQ(Restored(found.path), (std::vector<float>{2, 2, 2}));
}

TEST_F(CheckpointManagerTest, ANewDirectoryHasNoCheckpointAndNoWarning) {
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, "");
  EXPECT_EQ(found.warning, "");
  CheckpointManager manager(Dir(), Identity(1));
  EXPECT_EQ(manager.Latest().path, "");
}

// The state a full disk left: a whole ckpt-2 beside an empty index.
TEST_F(CheckpointManagerTest, AnEmptyIndexFallsBackToTheNewestWholeCheckpoint) {
  SaveTwo();
  WriteText(File("checkpoint"), "");
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-2").string());
  EXPECT_NE(found.warning.find("the index '" + File("checkpoint").string() +
                               "' is empty; using "
                               "ckpt-2, the newest whole checkpoint"),
            std::string::npos)
      << found.warning;
  EXPECT_EQ(Restored(found.path), (std::vector<float>{2, 2, 2}));
}

TEST_F(CheckpointManagerTest, AMissingIndexFallsBackToTheNewestWholeCheckpoint) {
  SaveTwo();
  fs::remove(File("checkpoint"));
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-2").string());
  EXPECT_NE(found.warning.find("there is no index"), std::string::npos) << found.warning;
  EXPECT_NE(found.warning.find("using ckpt-2, the newest whole checkpoint"), std::string::npos);
}

TEST_F(CheckpointManagerTest, AnIndexNamingAMissingFileFallsBackToAnOlderWholeOne) {
  SaveTwo();
  fs::remove(File("ckpt-2"));
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-1").string());
  EXPECT_NE(found.warning.find("names ckpt-2, which is missing; using ckpt-1, the newest whole "
                               "checkpoint"),
            std::string::npos)
      << found.warning;
  EXPECT_EQ(Restored(found.path), (std::vector<float>{1, 1, 1}));
  // The manager (what --resume uses) finds the same.
  CheckpointManager manager(Dir(), Identity(1));
  EXPECT_EQ(manager.Latest().path, File("ckpt-1").string());
}

TEST_F(CheckpointManagerTest, ATruncatedNewestCheckpointIsSkipped) {
  SaveTwo();
  Truncate("ckpt-2");
  FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-1").string());
  EXPECT_NE(found.warning.find("names ckpt-2, which is not a whole checkpoint"), std::string::npos)
      << found.warning;
  EXPECT_NE(found.warning.find("truncated"), std::string::npos) << found.warning;

  fs::remove(File("checkpoint"));  // the scan skips it too, and says so
  found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-1").string());
  EXPECT_NE(found.warning.find("(skipped: checkpoint '" + File("ckpt-2").string() + "': truncated"),
            std::string::npos)
      << found.warning;
}

TEST_F(CheckpointManagerTest, NoWholeCheckpointAtAllIsAWarningAndNoPath) {
  SaveTwo();
  Truncate("ckpt-1");
  Truncate("ckpt-2");
  WriteText(File("checkpoint"), "garbage\n");
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, "");
  EXPECT_NE(found.warning.find("names no checkpoint (it holds \"garbage \")"), std::string::npos)
      << found.warning;
  EXPECT_NE(found.warning.find("there is no whole checkpoint (ckpt-<number>)"), std::string::npos)
      << found.warning;
}

// Two writers of one file (two jobs, or two threads) never share a temporary name: with the old
// fixed "<path>.tmp" one writer's rename took the other's file ("cannot rename ... No such file").
TEST_F(CheckpointManagerTest, TemporaryNamesAreUniquePerWriter) {
  const std::string path = File("x").string();
  const std::string a = internal::TemporaryNameFor(path), b = internal::TemporaryNameFor(path);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(path + ".tmp." + std::to_string(::getpid()) + ".", 0), 0u) << a;
  EXPECT_TRUE(internal::IsTemporaryNameOf(fs::path(a).filename().string(), "x"));

  fs::create_directories(root_ / "ckpt");
  fs::create_directories(File("x.tmp"));  // the old fixed name, in the way
  std::vector<std::string> errors(2);
  const std::vector<Variable> values = {MakeVariable("w", {0, 0, 0}), MakeVariable("w", {1, 0, 0})};
  std::vector<std::thread> writers;
  for (size_t t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      Checkpoint checkpoint;
      checkpoint.Track("w", values[t]);
      for (int i = 0; i < 50 && errors[t].empty(); ++i) {
        try {
          checkpoint.Save(path);
        } catch (const Error& e) {
          errors[t] = e.what();
        }
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  const std::vector<float> last = Restored(path);  // whole: one writer's or the other's
  EXPECT_TRUE(last == (std::vector<float>{0, 0, 0}) || last == (std::vector<float>{1, 0, 0}));
}

TEST_F(CheckpointManagerTest, StaleTemporariesOfADeadWriterAreRemovedByTheNext) {
  SaveTwo();
  WriteText(File("ckpt-3.tmp.99999.0badf00d"), "half a checkpoint");
  WriteText(File("checkpoint.tmp.99999.0badf00d"), "");
  WriteText(File("notes.tmp.1"), "not ours");
  CheckpointManager manager(Dir(), Identity(1));
  EXPECT_EQ(Temporaries(), std::vector<std::string>{"notes.tmp.1"});
}

TEST_F(CheckpointManagerTest, AnotherJobIsRefusedAndTheOverrideTakesTheDirectoryOver) {
  SaveTwo();
  ExpectError([&] { CheckpointManager other(Dir(), Identity(7)); }, CHORUS_INVALID_ARGUMENT,
              {"the checkpoint directory '" + Dir() +
                   "' is not this job's: it belongs to "
                   "another job (seed 1, model 1 variable of 3 values (fingerprint ",
               "cluster 1 worker of 1 replica; they differ in seed); this job is seed 7, model",
               "give this job a directory of its own, or take this one over with "
               "CheckpointManagerOptions::take_over"});
  CheckpointManagerOptions options;
  options.take_over_hint = "--checkpoint-dir-takeover";
  ExpectError([&] { CheckpointManager other(Dir(), Identity(7), nullptr, options); },
              CHORUS_INVALID_ARGUMENT, {"take this one over with --checkpoint-dir-takeover"});
  EXPECT_NE(ReadText(File("owner")).find("seed: 1\n"), std::string::npos) << "still the owner";

  options.take_over = true;
  CheckpointManager taken(Dir(), Identity(7), nullptr, options);
  EXPECT_NE(ReadText(File("owner")).find("seed: 7\n"), std::string::npos);
  EXPECT_EQ(taken.Latest().path, File("ckpt-2").string()) << "its checkpoints are now this job's";
}

TEST_F(CheckpointManagerTest, TheSameJobRestartedResumesFromItsCheckpoints) {
  SaveTwo();
  CheckpointManager again(Dir(), Identity(1));
  EXPECT_EQ(again.Latest().path, File("ckpt-2").string());
  again.Save(checkpoint_, 3);
  EXPECT_EQ(FindLatestCheckpoint(Dir()).number, 3);
}

TEST_F(CheckpointManagerTest, AnUnreadableOwnerRecordIsRefused) {
  fs::create_directories(root_ / "ckpt");
  WriteText(File("owner"), "somebody else's\n");
  ExpectError([&] { CheckpointManager manager(Dir(), Identity(1)); }, CHORUS_INVALID_ARGUMENT,
              {"its owner record '" + File("owner").string() +
               "' is unreadable (it holds \"somebody else's \")"});
}

TEST_F(CheckpointManagerTest, ASecondWriterIsRefusedWhileTheFirstHoldsTheLock) {
  {
    CheckpointManager first(Dir(), Identity(1));
    ExpectError([&] { CheckpointManager second(Dir(), Identity(1)); }, CHORUS_UNAVAILABLE,
                {"is in use by another CheckpointManager of this process (process " +
                 std::to_string(::getpid()) + " on "});
  }
  CheckpointManager after(Dir(), Identity(1));  // released with the first
}

// Another process's lock (flock of another open file description, as another process's is).
TEST_F(CheckpointManagerTest, AnotherProcesssLockIsNamedInTheRefusal) {
  fs::create_directories(root_ / "ckpt");
  const int fd = ::open(File("lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string holder = "process 4242 on another-host\n";
  ASSERT_EQ(::write(fd, holder.data(), holder.size()), static_cast<ssize_t>(holder.size()));
  ExpectError([&] { CheckpointManager manager(Dir(), Identity(1)); }, CHORUS_UNAVAILABLE,
              {"the checkpoint directory '" + Dir() +
               "' is in use by another job: process 4242 "
               "on another-host writes there now (it holds the lock '" +
               File("lock").string() + "')"});
  ::close(fd);
  CheckpointManager manager(Dir(), Identity(1));
}

// Root ignores permissions, so the directory cannot exist instead: its parent is a file.
TEST_F(CheckpointManagerTest, ADirectoryThatCannotBeCreatedIsAClearError) {
  WriteText(root_ / "file", "");
  const std::string dir = (root_ / "file" / "ckpt").string();
  ExpectError([&] { CheckpointManager manager(dir, Identity(1)); }, CHORUS_INVALID_ARGUMENT,
              {"cannot create the checkpoint directory '" + dir + "': Not a directory"});
}

// A real failed write, for root too: a file size limit (RLIMIT_FSIZE) below the checkpoint's
// size makes write() fail with EFBIG, as a full disk makes it fail with ENOSPC.
TEST_F(CheckpointManagerTest, AFailedWriteKeepsThePreviousCheckpointAndIndex) {
  SaveTwo();
  CheckpointManager manager(Dir(), Identity(1));
  Variable big = MakeVariable("w", std::vector<float>(4096, 3.0f));
  Checkpoint large;
  large.Track("w", big);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = old;
  limited.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  ExpectError([&] { manager.Save(large, 3); }, CHORUS_INTERNAL,
              {"checkpoint: cannot write '" + File("ckpt-3.tmp.").string(), "File too large"});
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(Temporaries().empty());
  EXPECT_FALSE(fs::exists(File("ckpt-3")));
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-2").string());
  EXPECT_EQ(found.warning, "");
}

// The index cannot be written (here a directory is in its place): the checkpoint is whole, the
// error says so, and a restore finds it.
TEST_F(CheckpointManagerTest, AFailedIndexWriteIsReportedAndTheCheckpointStillFound) {
  CheckpointManager manager(Dir(), Identity(1));
  fs::create_directories(File("checkpoint"));
  ExpectError([&] { manager.Save(checkpoint_, 1); }, CHORUS_INVALID_ARGUMENT,
              {"ckpt-1 is whole, but the index could not be updated to name it (the index is left "
               "as it was): checkpoint: cannot rename",
               "Is a directory"});
  EXPECT_TRUE(Temporaries().empty());
  const FoundCheckpoint found = FindLatestCheckpoint(Dir());
  EXPECT_EQ(found.path, File("ckpt-1").string());
  EXPECT_NE(found.warning.find("cannot be read (Is a directory); using ckpt-1"), std::string::npos)
      << found.warning;
}

TEST_F(CheckpointManagerTest, MaxToKeepDeletesTheOlderCheckpoints) {
  CheckpointManagerOptions options;
  options.max_to_keep = 2;
  CheckpointManager manager(Dir(), Identity(1), nullptr, options);
  for (int n = 1; n <= 4; ++n) manager.Save(checkpoint_, n);
  EXPECT_FALSE(fs::exists(File("ckpt-1")));
  EXPECT_FALSE(fs::exists(File("ckpt-2")));
  EXPECT_TRUE(fs::exists(File("ckpt-3")));
  EXPECT_TRUE(fs::exists(File("ckpt-4")));
  manager.Save(checkpoint_, 2);  // a job that went back: the later numbers are stale
  EXPECT_TRUE(fs::exists(File("ckpt-2")));
  EXPECT_FALSE(fs::exists(File("ckpt-3")));
  EXPECT_FALSE(fs::exists(File("ckpt-4")));
}

TEST_F(CheckpointManagerTest, DeleteAllLeavesTheDirectoryFreeForAnyJob) {
  SaveTwo();
  {
    CheckpointManager manager(Dir(), Identity(1));
    manager.DeleteAll();
  }
  EXPECT_FALSE(fs::exists(File("ckpt-1")));
  EXPECT_FALSE(fs::exists(File("ckpt-2")));
  EXPECT_FALSE(fs::exists(File("checkpoint")));
  EXPECT_FALSE(fs::exists(File("owner")));
  CheckpointManager other(Dir(), Identity(7));
  EXPECT_EQ(other.Latest().path, "");
}

TEST(JobIdentity, SignaturesTellModelsAndClustersApart) {
  const std::string a = ModelSignature({{"b", CHORUS_F32, {2}}, {"a", CHORUS_F32, {3, 4}}});
  EXPECT_EQ(a, ModelSignature({{"a", CHORUS_F32, {3, 4}}, {"b", CHORUS_F32, {2}}}))
      << "the order of creation does not matter";
  EXPECT_EQ(a.rfind("2 variables of 14 values (fingerprint ", 0), 0u) << a;
  EXPECT_NE(a, ModelSignature({{"a", CHORUS_F32, {4, 3}}, {"b", CHORUS_F32, {2}}}));
  EXPECT_NE(a, ModelSignature({{"a", CHORUS_F32, {3, 4}}, {"c", CHORUS_F32, {2}}}));
  EXPECT_NE(a, ModelSignature({{"a", CHORUS_I32, {3, 4}}, {"b", CHORUS_F32, {2}}}));
  EXPECT_EQ(ClusterShape(nullptr), "1 worker of 1 replica");
  EXPECT_EQ(Identity(3).ToString().rfind("seed 3, model 1 variable of 3 values (fingerprint ", 0),
            0u);
}

}  // namespace
}  // namespace chorus
