#include "ranks_as_processes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
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
// chorus-launch stops the ranks after this long (4 times the kit's time-out, at least 240 s: a
// run makes many waits, each bounded by the time-out); the kit gives it a little more to report.
constexpr int kLeastLaunchTimeoutSeconds = 240;
constexpr int kLaunchTimeoutsPerRun = 4;
constexpr int kLaunchReportSeconds = 30;

int LaunchTimeoutSeconds(int64_t timeout_ms) {
  const int64_t scaled = (timeout_ms * kLaunchTimeoutsPerRun + 999) / 1000;
  return static_cast<int>(std::clamp<int64_t>(scaled, kLeastLaunchTimeoutSeconds, 1 << 30));
}

// Seconds as --timeout takes them: "60", "2.5".
std::string SecondsText(int64_t ms) {
  std::ostringstream text;
  text << static_cast<double>(ms) / 1000;
  return text.str();
}

bool IsRankSuiteTest(const std::string& name) {
  for (const char* suite : {"Collective.", "Transport.", "Algorithm."}) {
    if (name.rfind(suite, 0) == 0) return true;
  }
  return false;
}

// The --gtest_filter for the rank processes: the tests of the rank suites that this run's filter
// selects, by name; kRankSuitesFilter when it selects none of them (--gtest_filter=
// 'RanksAsProcesses.*' asks for all), or all of them.
std::string RankProcessesFilter() {
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  size_t rank_tests = 0;
  std::vector<std::string> selected;
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const testing::TestInfo& info = *suite.GetTestInfo(j);
      const std::string name = std::string(info.test_suite_name()) + "." + info.name();
      if (!IsRankSuiteTest(name)) continue;
      ++rank_tests;
      if (info.should_run()) selected.push_back(name);
    }
  }
  if (selected.empty() || selected.size() == rank_tests) return kRankSuitesFilter;
  std::string filter;
  for (std::string name : selected) {
    // In a filter '-' starts the negative patterns and ':' separates patterns: '?' matches them.
    std::replace(name.begin(), name.end(), '-', '?');
    std::replace(name.begin(), name.end(), ':', '?');
    filter += (filter.empty() ? "" : ":") + name;
  }
  return filter;
}

std::filesystem::path SelfPath() {
  std::error_code error;
  return std::filesystem::read_symlink("/proc/self/exe", error);
}

// Runs `argv` with this process's environment and standard streams; its exit code, 128 + signal
// when a signal ended it, or -1 with *problem set when it could not be started or did not end.
int RunAndWait(const std::vector<std::string>& argv, int limit_seconds, std::string* problem) {
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
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(limit_seconds);
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
      *problem =
          "chorus-launch did not end within " + std::to_string(limit_seconds) + " s and was killed";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void RunRanks(int ranks, const std::vector<std::string>& kit_arguments, int64_t timeout_ms) {
  const std::filesystem::path self = SelfPath();
  if (self.empty()) GTEST_SKIP() << "cannot read /proc/self/exe, so the kit cannot start itself";
  const std::filesystem::path launcher = self.parent_path() / "chorus-launch";
  if (!std::filesystem::exists(launcher)) {
    GTEST_FAIL() << "ranks as processes need chorus-launch beside chorus-conformance, at "
                 << launcher.string()
                 << "; install both from one chorus (cmake --install puts both in bin/), or run "
                    "with --threads-only";
  }
  const int launch_timeout = LaunchTimeoutSeconds(timeout_ms);
  const std::string filter = RankProcessesFilter();
  // --keep-going: a rank that fails a check, or dies, does not stop the others, which finish
  // their checks and say what they saw (a peer lost, a key that never came).
  std::vector<std::string> argv = {launcher.string(),
                                   "-n",
                                   std::to_string(ranks),
                                   "--keep-going",
                                   "--timeout",
                                   std::to_string(launch_timeout),
                                   "--",
                                   self.string()};
  argv.insert(argv.end(), kit_arguments.begin(), kit_arguments.end());
  argv.insert(argv.end(), {"--timeout", SecondsText(timeout_ms), "--ranks-from-environment",
                           "--gtest_brief=1", "--gtest_filter=" + filter});
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  std::printf("chorus-conformance: %d ranks as processes: %s\n", ranks, command.c_str());
  std::string problem;
  const int code = RunAndWait(argv, launch_timeout + kLaunchReportSeconds, &problem);
  ASSERT_NE(code, -1) << problem;
  EXPECT_EQ(code, 0)
      << "the " << (filter == kRankSuitesFilter ? filter : "selected") << " checks failed with "
      << ranks << " ranks as processes (chorus-launch exit code " << code
      << "; 124 is its time-out); the ranks' own lines above, prefixed [worker i], name the "
         "check. Passing with ranks as threads but not as processes usually means the plugin "
         "relies on something one process shares: memory, or a store it reads after another "
         "rank's process (the leader, which serves the store) has ended. Rerun one: "
      << command;
}

}  // namespace

void RegisterRanksAsProcessesTests(const PluginLibrary& plugin,
                                   const std::vector<std::string>& kit_arguments,
                                   int64_t timeout_ms) {
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
                          [ranks, kit_arguments, timeout_ms]() -> testing::Test* {
                            struct RanksTest : testing::Test {
                              int ranks;
                              std::vector<std::string> arguments;
                              int64_t timeout_ms;
                              RanksTest(int r, std::vector<std::string> a, int64_t t)
                                  : ranks(r), arguments(std::move(a)), timeout_ms(t) {}
                              void TestBody() override { RunRanks(ranks, arguments, timeout_ms); }
                            };
                            return new RanksTest(ranks, kit_arguments, timeout_ms);
                          });
  }
}

}  // namespace chorus::conformance
