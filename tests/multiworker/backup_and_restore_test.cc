// BackupAndRestore with real processes: `chorus-launch -n 2` of a fit() under
// MultiWorkerMirroredStrategy, worker 1 killed (SIGKILL) as its third epoch begins; the job fails,
// and the same job started again resumes at the third epoch (not the first) and ends with the
// weights of a job that was never interrupted. And a backup the writer cannot write stops both
// workers at once, each naming the writer, long before the collective time-out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<float> ReadFloats(const std::filesystem::path& path) {
  const std::string bytes = ReadAll(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(values.size() * 4),
            reinterpret_cast<char*>(values.data()));
  return values;
}

// Runs the job; returns its exit status (as std::system gives it) and leaves its output in log.
// `extra`: more arguments of the task (WRITER_FILE_LIMIT); `environment`: "NAME=value " prefixes.
int Job(const std::filesystem::path& dir, const std::string& backup, int kill_at,
        const std::string& weights, const std::string& log, const std::string& extra = "",
        const std::string& environment = "") {
  const std::string command = environment + std::string(CHORUS_LAUNCH) + " -n 2 --timeout 120 -- " +
                              CHORUS_FIT_BACKUP_TASK + " " + (dir / backup).string() + " 4 " +
                              std::to_string(kill_at) + " " + (dir / weights).string() + extra +
                              " > " + (dir / log).string() + " 2>&1";
  return std::system(command.c_str());
}

// The line of `log` that holds `part`, or "".
std::string LineWith(const std::string& log, const std::string& part) {
  const size_t at = log.find(part);
  if (at == std::string::npos) return "";
  const size_t begin = log.rfind('\n', at);
  const size_t end = log.find('\n', at);
  return log.substr(begin == std::string::npos ? 0 : begin + 1,
                    end == std::string::npos ? std::string::npos
                                             : end - (begin == std::string::npos ? 0 : begin + 1));
}

TEST(BackupAndRestore, AJobRestartedAfterAWorkerWasKilledResumesAtItsLastEpoch) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_backup_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  EXPECT_NE(Job(dir, "backup", 2, "killed.bin", "killed.log"), 0) << ReadAll(dir / "killed.log");
  const std::string killed = ReadAll(dir / "killed.log");
  EXPECT_NE(killed.find("worker 1"), std::string::npos) << killed;
  EXPECT_EQ(killed.find("epochs run:"), std::string::npos) << killed;
  ASSERT_TRUE(std::filesystem::exists(dir / "backup" / "backup-2")) << killed;

  ASSERT_EQ(Job(dir, "backup", -1, "resumed.bin", "resumed.log"), 0)
      << ReadAll(dir / "resumed.log");
  const std::string resumed = ReadAll(dir / "resumed.log");
  EXPECT_NE(resumed.find("resuming at epoch 3 of 4"), std::string::npos) << resumed;
  EXPECT_NE(resumed.find("epochs run: 2 3\n"), std::string::npos) << resumed;
  EXPECT_EQ(resumed.find("Epoch 1/4"), std::string::npos) << resumed;
  EXPECT_FALSE(std::filesystem::exists(dir / "backup" / "backup-4")) << "a finished job keeps none";
  EXPECT_FALSE(std::filesystem::exists(dir / "backup" / "checkpoint"));

  ASSERT_EQ(Job(dir, "fresh_backup", -1, "uninterrupted.bin", "uninterrupted.log"), 0)
      << ReadAll(dir / "uninterrupted.log");
  EXPECT_NE(ReadAll(dir / "uninterrupted.log").find("epochs run: 0 1 2 3\n"), std::string::npos);
  const std::vector<float> a = ReadFloats(dir / "resumed.bin");
  const std::vector<float> b = ReadFloats(dir / "uninterrupted.bin");
  ASSERT_EQ(a.size(), 24u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  std::filesystem::remove_all(dir);
}

// The writer's first backup fails (a file size limit: EFBIG, as a full disk gives ENOSPC). The
// writer reports its own failure and the other worker one that names the writer, both at once:
// with a collective time-out of 60 s, the job ends in a few seconds.
TEST(BackupAndRestore, AFailedSaveStopsEveryWorkerAtOnceAndTheOtherNamesTheWriter) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("chorus_backup_fail_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(Job(dir, "backup", -1, "w.bin", "failed.log", " 256", "CHORUS_TIMEOUT_SECONDS=60 "), 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string log = ReadAll(dir / "failed.log");
  EXPECT_LT(seconds, 10.0) << log;
  const std::string backup = "save checkpoint '" + (dir / "backup" / "backup-1").string() + "': ";
  const std::string writer = LineWith(log, "worker 0 could not " + backup);
  EXPECT_EQ(writer.rfind("[worker 0] ", 0), 0u) << log;
  EXPECT_NE(writer.find("File too large"), std::string::npos) << log;
  const std::string other = LineWith(log, "worker 0 (the checkpoint writer) could not " + backup);
  EXPECT_EQ(other.rfind("[worker 1] chorus_fit_backup_task: ", 0), 0u) << log;
  EXPECT_NE(other.find("File too large"), std::string::npos) << log;
  EXPECT_EQ(log.find("TIMEOUT"), std::string::npos) << log;
  EXPECT_EQ(log.find("timed out"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
