#include "ranks_as_processes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "reference.h"

extern char** environ;

namespace chorus::conformance {
namespace {

constexpr int kRankCounts[] = {2, 3, 4};
// The short sweep (sanitizer builds) leaves out 4 processes: the threads run 4 and more ranks
// through the same code, and 4 processes on a small machine cost the most.
constexpr int kShortSweepRankCounts[] = {2, 3};
// chorus-launch stops the ranks after this long; the kit gives it a little more to report.
constexpr int kLaunchTimeoutSeconds = 240;
constexpr auto kWaitLimit = std::chrono::seconds(kLaunchTimeoutSeconds + 30);

std::filesystem::path SelfPath() {
  std::error_code error;
  return std::filesystem::read_symlink("/proc/self/exe", error);
}

// Runs `argv` with this process's environment and standard streams; its exit code, 128 + signal
// when a signal ended it, or -1 with *problem set when it could not be started or did not end.
int RunAndWait(const std::vector<std::string>& argv, std::string* problem) {
  std::vector<char*> raw;
  for (const std::string& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = -1;
  if (const int err = posix_spawn(&pid, raw[0], nullptr, nullptr, raw.data(), environ); err != 0) {
    *problem = "cannot start " + argv[0] + ": " + std::strerror(err);
    return -1;
  }
  const auto give_up = std::chrono::steady_clock::now() + kWaitLimit;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (done < 0 && errno != EINTR) {
      *problem = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      *problem = "chorus-launch did not end within " + std::to_string(kLaunchTimeoutSeconds + 30) +
                 " s and was killed";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void RunRanks(int ranks, const std::vector<std::string>& kit_arguments) {
  const std::filesystem::path self = SelfPath();
  if (self.empty()) GTEST_SKIP() << "cannot read /proc/self/exe, so the kit cannot start itself";
  const std::filesystem::path launcher = self.parent_path() / "chorus-launch";
  if (!std::filesystem::exists(launcher)) {
    GTEST_FAIL() << "ranks as processes need chorus-launch beside chorus-conformance, at "
                 << launcher.string()
                 << "; install both from one chorus (cmake --install puts both in bin/), or run "
                    "with --threads-only";
  }
  std::vector<std::string> argv = {launcher.string(),
                                   "-n",
                                   std::to_string(ranks),
                                   "--timeout",
                                   std::to_string(kLaunchTimeoutSeconds),
                                   "--",
                                   self.string()};
  argv.insert(argv.end(), kit_arguments.begin(), kit_arguments.end());
  argv.insert(argv.end(), {"--ranks-from-environment", "--gtest_brief=1",
                           std::string("--gtest_filter=") + kRankSuitesFilter});
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  std::printf("chorus-conformance: %d ranks as processes: %s\n", ranks, command.c_str());
  std::string problem;
  const int code = RunAndWait(argv, &problem);
  ASSERT_NE(code, -1) << problem;
  EXPECT_EQ(code, 0)
      << "the " << kRankSuitesFilter << " checks failed with " << ranks
      << " ranks as processes (chorus-launch exit code " << code
      << "; 124 is its time-out); the ranks' own lines above, prefixed [worker i], name the "
         "check. Passing with ranks as threads but not as processes usually means the plugin "
         "relies on something one process shares: memory, or a store it reads after another "
         "rank's process (the leader, which serves the store) has ended. Rerun one: "
      << command;
}

}  // namespace

void RegisterRanksAsProcessesTests(const PluginLibrary& plugin,
                                   const std::vector<std::string>& kit_arguments) {
  if (plugin.collectives().empty() && plugin.transports().empty() && plugin.algorithms().empty()) {
    return;
  }
  std::vector<int> rank_counts(std::begin(kRankCounts), std::end(kRankCounts));
  if (internal::ShortSweep()) {
    rank_counts.assign(std::begin(kShortSweepRankCounts), std::end(kShortSweepRankCounts));
  }
  for (int ranks : rank_counts) {
    const std::string name = "Ranks" + std::to_string(ranks);
    testing::RegisterTest("RanksAsProcesses", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [ranks, kit_arguments]() -> testing::Test* {
                            struct RanksTest : testing::Test {
                              int ranks;
                              std::vector<std::string> arguments;
                              RanksTest(int r, std::vector<std::string> a)
                                  : ranks(r), arguments(std::move(a)) {}
                              void TestBody() override { RunRanks(ranks, arguments); }
                            };
                            return new RanksTest(ranks, kit_arguments);
                          });
  }
}

}  // namespace chorus::conformance
