// BackupAndRestore with real processes: `chorus-launch -n 2` of a fit() under
// MultiWorkerMirroredStrategy, worker 1 killed (SIGKILL) as its third epoch begins; the job fails,
// and the same job started again resumes at the third epoch (not the first) and ends with the
// weights of a job that was never interrupted.
#include <gtest/gtest.h>
#include <unistd.h>

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
int Job(const std::filesystem::path& dir, const std::string& backup, int kill_at,
        const std::string& weights, const std::string& log) {
  const std::string command = std::string(CHORUS_LAUNCH) + " -n 2 --timeout 120 -- " +
                              CHORUS_FIT_BACKUP_TASK + " " + (dir / backup).string() + " 4 " +
                              std::to_string(kill_at) + " " + (dir / weights).string() + " > " +
                              (dir / log).string() + " 2>&1";
  return std::system(command.c_str());
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
  ASSERT_TRUE(std::filesystem::exists(dir / "backup" / "backup")) << killed;

  ASSERT_EQ(Job(dir, "backup", -1, "resumed.bin", "resumed.log"), 0)
      << ReadAll(dir / "resumed.log");
  const std::string resumed = ReadAll(dir / "resumed.log");
  EXPECT_NE(resumed.find("resuming at epoch 3 of 4"), std::string::npos) << resumed;
  EXPECT_NE(resumed.find("epochs run: 2 3\n"), std::string::npos) << resumed;
  EXPECT_EQ(resumed.find("Epoch 1/4"), std::string::npos) << resumed;
  EXPECT_FALSE(std::filesystem::exists(dir / "backup" / "backup")) << "a finished job keeps none";

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

}  // namespace
