// chorus-launch end to end, with launch_probe as the workers: TF_CONFIG per worker, prefixed
// whole lines, exit codes, stopping the others, the time-out, signals, and no process left behind.
#include <chorus/base/exit_status.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "chorus-launch-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// chorus-launch started with its stdout and stderr going to files in `dir`.
class Launch {
 public:
  Launch(const TempDir& dir, std::vector<std::string> args) : dir_(dir) {
    args.insert(args.begin(), CHORUS_LAUNCH_PATH);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (dir.path() / "stdout").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (dir.path() / "stderr").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    start_ = Clock::now();
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start chorus-launch");
  }
  ~Launch() {
    if (pid_ > 0) {  // a failed assertion left it running: do not leave it behind
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

  // Waits for chorus-launch; its exit code, 128 + signal when a signal ended it.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    seconds_ = std::chrono::duration<double>(Clock::now() - start_).count();
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  }
  double seconds() const { return seconds_; }
  std::string out() const { return ReadFile(dir_.path() / "stdout"); }
  std::string err() const { return ReadFile(dir_.path() / "stderr"); }

 private:
  const TempDir& dir_;
  pid_t pid_ = -1;
  Clock::time_point start_;
  double seconds_ = 0;
};

// The pids that probes wrote to `dir`/<prefix><i>.pid.
std::vector<pid_t> Pids(const fs::path& dir, const std::string& prefix) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && entry.path().extension() == ".pid") {
      pids.push_back(std::stoi(ReadFile(entry.path())));
    }
  }
  return pids;
}

// True once `pid` no longer runs (gone, or a zombie waiting for init), within two seconds.
bool Gone(pid_t pid) {
  const auto give_up = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    if (kill(pid, 0) == -1 && errno == ESRCH) return true;
    std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') {
      return true;
    }
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ExpectAllGone(const fs::path& dir, size_t expected) {
  const std::vector<pid_t> pids = Pids(dir, "");
  EXPECT_EQ(pids.size(), expected);
  for (pid_t pid : pids) EXPECT_TRUE(Gone(pid)) << "process " << pid << " was left behind";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ChorusLaunch, EveryWorkerGetsItsIndexAndTheCluster) {
  TempDir dir;
  Launch launch(dir, {"-n", "3", LAUNCH_PROBE_PATH, "print"});
  ASSERT_EQ(launch.Wait(), 0) << launch.err();
  const std::regex line(
      R"(\[worker (\d)\] index=(\d) size=3 address=(127\.0\.0\.1:\d+) tf_config=(.*))");
  std::map<int, std::string> address_of;
  std::set<std::string> tf_configs;
  for (const std::string& text : Lines(launch.out())) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(text, match, line)) << text;
    EXPECT_EQ(match[1], match[2]) << "the prefix names the worker whose index it is";
    address_of[std::stoi(match[2])] = match[3];
    tf_configs.insert(match[4]);
  }
  ASSERT_EQ(address_of.size(), 3u) << launch.out();
  EXPECT_EQ(std::set<std::string>({address_of[0], address_of[1], address_of[2]}).size(), 3u);
  const std::string cluster = "{\"cluster\":{\"worker\":[\"" + address_of[0] + "\",\"" +
                              address_of[1] + "\",\"" + address_of[2] + "\"]},";
  for (int i = 0; i < 3; ++i) {
    const std::string expected =
        cluster + "\"task\":{\"type\":\"worker\",\"index\":" + std::to_string(i) + "}}";
    EXPECT_TRUE(tf_configs.count(expected)) << expected;
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Contains(launch.err(), "[worker " + std::to_string(i) + "] stderr from worker " +
                                           std::to_string(i) + "\n"))
        << launch.err();
  }
}

TEST(ChorusLaunch, PortBase) {
  TempDir dir;
  Launch launch(dir, {"-n", "2", "--port-base", "23456", "--", LAUNCH_PROBE_PATH, "print"});
  ASSERT_EQ(launch.Wait(), 0) << launch.err();
  EXPECT_TRUE(Contains(launch.out(), "[worker 0] index=0 size=2 address=127.0.0.1:23456 "));
  EXPECT_TRUE(Contains(launch.out(), "[worker 1] index=1 size=2 address=127.0.0.1:23457 "));
}

TEST(ChorusLaunch, LinesOfWorkersDoNotInterleave) {
  TempDir dir;
  const int kLines = 300;
  const size_t kLength = 5000;  // longer than a pipe's atomic write
  Launch launch(dir, {"-n", "4", LAUNCH_PROBE_PATH,
                      "lines=" + std::to_string(kLines) + ":" + std::to_string(kLength)});
  ASSERT_EQ(launch.Wait(), 0) << launch.err();
  std::map<int, int> next_line;
  for (const std::string& text : Lines(launch.out())) {
    ASSERT_EQ(text.size(), std::string("[worker 0] ").size() + kLength) << text.substr(0, 80);
    const int worker = text[8] - '0';
    const std::string head = "[worker " + std::to_string(worker) + "] w" + std::to_string(worker) +
                             " l" + std::to_string(next_line[worker]) + " ";
    ASSERT_EQ(text.substr(0, head.size()), head);
    ASSERT_EQ(text.find_first_not_of(static_cast<char>('a' + worker), head.size()),
              std::string::npos)
        << text.substr(0, 80);
    ++next_line[worker];
  }
  for (int worker = 0; worker < 4; ++worker) EXPECT_EQ(next_line[worker], kLines);
}

TEST(ChorusLaunch, LastLineWithoutNewline) {
  TempDir dir;
  Launch launch(dir, {"-n", "1", LAUNCH_PROBE_PATH, "partial"});
  ASSERT_EQ(launch.Wait(), 0) << launch.err();
  EXPECT_EQ(launch.out(), "[worker 0] no newline at end\n");
}

TEST(ChorusLaunch, AFailingWorkerStopsTheOthers) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  // Every worker and its child write their pid first; then worker 1 fails, the others sleep.
  Launch launch(dir, {"-n", "3", "--timeout", "60", LAUNCH_PROBE_PATH, pids, "grandchild",
                      "wait-files=6", "exit=3@1", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 3) << launch.err();
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_TRUE(
      Contains(launch.err(), "chorus-launch: worker 1 exited with code 3; stopping the others\n"))
      << launch.err();
  ExpectAllGone(dir.path(), 6);
}

// A stopped worker (SIGSTOP) cannot act on the SIGTERM until it is continued: the launcher
// continues it, so it ends with the others rather than at the SIGKILL after the 5 s grace.
TEST(ChorusLaunch, AStoppedWorkerEndsWithTheOthersBeforeTheGrace) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(
      dir, {"-n", "3", "--timeout", "60", LAUNCH_PROBE_PATH, pids, "wait-files=3",
            "crash=" + std::to_string(SIGSTOP) + "@2", "sleep=0.5", "exit=3@1", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 3) << launch.err();
  EXPECT_LT(launch.seconds(), 4.0) << "the stopped worker waited for the SIGKILL";
  EXPECT_FALSE(Contains(launch.err(), "killing them")) << launch.err();
  ExpectAllGone(dir.path(), 3);
}

TEST(ChorusLaunch, AWorkerKilledByASignalGives128PlusTheSignal) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "2", "--timeout", "60", LAUNCH_PROBE_PATH, pids, "wait-files=2",
                      "crash=" + std::to_string(SIGABRT) + "@0", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 128 + SIGABRT) << launch.err();
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_TRUE(Contains(launch.err(), "chorus-launch: worker 0 exited with code " +
                                         std::to_string(128 + SIGABRT) +
                                         " (killed by SIGABRT: Aborted); stopping the others\n"))
      << launch.err();
  ExpectAllGone(dir.path(), 2);
}

// A worker that chorus's watchdog ended (a plugin call that never returned) is named as such.
TEST(ChorusLaunch, AWorkerEndedByTheWatchdogIsNamedAsSuch) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir,
                {"-n", "2", "--timeout", "60", LAUNCH_PROBE_PATH, pids, "wait-files=2",
                 "exit=" + std::to_string(chorus::kWatchdogExitStatus) + "@1", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), chorus::kWatchdogExitStatus) << launch.err();
  EXPECT_TRUE(Contains(launch.err(),
                       "chorus-launch: worker 1 exited with code 70 (chorus's "
                       "watchdog ended it: a call into a plugin did not return; "
                       "its last \"[chorus watchdog]\" line says which)"))
      << launch.err();
  ExpectAllGone(dir.path(), 2);
}

// A worker preempted by its scheduler (SIGTERM) is reported with the signal.
TEST(ChorusLaunch, APreemptedWorkerIsReportedWithItsSignal) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "2", "--timeout", "60", LAUNCH_PROBE_PATH, pids, "wait-files=2",
                      "crash=" + std::to_string(SIGTERM) + "@1", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 128 + SIGTERM) << launch.err();
  EXPECT_TRUE(Contains(launch.err(), "chorus-launch: worker 1 exited with code " +
                                         std::to_string(128 + SIGTERM) +
                                         " (killed by SIGTERM: Terminated); stopping the others\n"))
      << launch.err();
  ExpectAllGone(dir.path(), 2);
}

TEST(ChorusLaunch, TimeoutGives124) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(
      dir, {"-n", "2", "--timeout", "1", LAUNCH_PROBE_PATH, pids, "grandchild", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 124) << launch.err();
  EXPECT_GE(launch.seconds(), 1.0);
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_TRUE(Contains(launch.err(), "chorus-launch: timed out after 1 s; stopping the workers\n"))
      << launch.err();
  ExpectAllGone(dir.path(), 4);
}

TEST(ChorusLaunch, WorkersThatIgnoreSigtermAreKilledAfterTheGrace) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "2", "--timeout", "0.5", LAUNCH_PROBE_PATH, pids, "ignore-term",
                      "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 124) << launch.err();
  EXPECT_GE(launch.seconds(), 5.0);
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_TRUE(Contains(launch.err(),
                       "chorus-launch: workers still running 5 s after they were "
                       "asked to stop; killing them\n"))
      << launch.err();
  ExpectAllGone(dir.path(), 2);
}

TEST(ChorusLaunch, SigintIsPassedToTheWorkers) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "2", "--timeout", "60", LAUNCH_PROBE_PATH, pids, "sleep=forever"});
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (Pids(dir.path(), "worker").size() < 2 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(launch.pid(), SIGINT);
  EXPECT_EQ(launch.Wait(), 128 + SIGINT) << launch.err();
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_TRUE(Contains(launch.err(), "chorus-launch: got SIGINT; passing it to the workers\n"))
      << launch.err();
  ExpectAllGone(dir.path(), 2);
}

TEST(ChorusLaunch, WorkersDieWithAKilledLauncher) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "2", LAUNCH_PROBE_PATH, pids, "sleep=forever"});
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (Pids(dir.path(), "worker").size() < 2 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(launch.pid(), SIGKILL);
  EXPECT_EQ(launch.Wait(), 128 + SIGKILL);
  ExpectAllGone(dir.path(), 2);
}

// A wrapper script that forks the worker (no exec) puts it out of PR_SET_PDEATHSIG's reach; the
// launcher's pipe (CHORUS_LAUNCHER_FD) stops it anyway, naming the launcher.
TEST(ChorusLaunch, WorkersBehindAWrapperDieWithAKilledLauncher) {
  TempDir dir;
  const fs::path wrapper = dir.path() / "wrapper.sh";
  const fs::path log = dir.path() / "workers.log";
  std::ofstream(wrapper) << "#!/bin/sh\n\"$@\" 2>>'" << log.string() << "'\nexit $?\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "2", wrapper.string(), LAUNCH_PROBE_PATH, pids, "sleep=forever"});
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (Pids(dir.path(), "worker").size() < 2 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const pid_t launcher = launch.pid();
  kill(launcher, SIGKILL);
  EXPECT_EQ(launch.Wait(), 128 + SIGKILL);
  ExpectAllGone(dir.path(), 2);
  const std::string said = ReadFile(log);
  const std::string line = "the launcher (chorus-launch, pid " + std::to_string(launcher) +
                           ") died; stopping this worker";
  size_t count = 0;
  for (size_t at = said.find(line); at != std::string::npos; at = said.find(line, at + 1)) ++count;
  EXPECT_EQ(count, 2u) << said;
}

TEST(ChorusLaunch, AProgramThatCannotStart) {
  TempDir dir;
  Launch launch(dir, {"-n", "2", "/nonexistent/program"});
  EXPECT_EQ(launch.Wait(), 127);
  EXPECT_EQ(launch.err(),
            "chorus-launch: cannot start '/nonexistent/program' for worker 0: No such file or "
            "directory\n");
}

// --- --keep-going ----------------------------------------------------------------------------

// Worker 1 exits with 3, worker 2 is killed (SIGKILL) half a second later; worker 0 goes on and
// prints after both. The launcher reports each failure as it comes and every worker's exit status
// at the end, and exits with the first failure's code.
TEST(ChorusLaunch, KeepGoingLetsTheOthersFinishAndReportsEveryExit) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "3", "--keep-going", "--timeout", "60", LAUNCH_PROBE_PATH, pids,
                      "wait-files=3", "exit=3@1", "sleep=0.5@worker:2",
                      "crash=" + std::to_string(SIGKILL) + "@2", "sleep=1.5@worker:0", "print"});
  EXPECT_EQ(launch.Wait(), 3) << launch.err();
  EXPECT_GE(launch.seconds(), 1.5) << "worker 0 was stopped before it finished";
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_TRUE(Contains(launch.out(), "[worker 0] index=0 size=3 ")) << launch.out();
  EXPECT_TRUE(Contains(launch.err(), "[worker 0] stderr from worker 0\n")) << launch.err();
  const std::string killed =
      "exited with code " + std::to_string(128 + SIGKILL) + " (killed by SIGKILL: Killed)";
  EXPECT_TRUE(Contains(launch.err(),
                       "chorus-launch: worker 1 exited with code 3; the others go on "
                       "(--keep-going)\n"))
      << launch.err();
  EXPECT_TRUE(Contains(launch.err(),
                       "chorus-launch: worker 2 " + killed + "; the others go on (--keep-going)\n"))
      << launch.err();
  EXPECT_TRUE(Contains(launch.err(),
                       "chorus-launch: worker 0 exited with code 0\n"
                       "chorus-launch: worker 1 exited with code 3\n"
                       "chorus-launch: worker 2 " +
                           killed +
                           "\n"
                           "chorus-launch: 2 of 3 workers failed; exit code 3\n"))
      << launch.err();
  EXPECT_FALSE(Contains(launch.err(), "stopping the others")) << launch.err();
  ExpectAllGone(dir.path(), 3);
}

TEST(ChorusLaunch, KeepGoingWhenAllSucceedExitsZeroAndReportsEach) {
  TempDir dir;
  Launch launch(dir, {"-n", "2", "--keep-going", LAUNCH_PROBE_PATH, "print"});
  EXPECT_EQ(launch.Wait(), 0) << launch.err();
  EXPECT_TRUE(Contains(launch.err(),
                       "chorus-launch: worker 0 exited with code 0\n"
                       "chorus-launch: worker 1 exited with code 0\n"))
      << launch.err();
  EXPECT_FALSE(Contains(launch.err(), "failed")) << launch.err();
}

// The time-out still bounds every worker: the survivor that never ends is stopped, and the job's
// code is the time-out's.
TEST(ChorusLaunch, KeepGoingStillTimesOut) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"-n", "2", "--keep-going", "--timeout", "1", LAUNCH_PROBE_PATH, pids,
                      "wait-files=2", "exit=1@0", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 124) << launch.err();
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_TRUE(Contains(launch.err(),
                       "chorus-launch: worker 0 exited with code 1; the others go on "
                       "(--keep-going)\n"))
      << launch.err();
  EXPECT_TRUE(Contains(launch.err(), "chorus-launch: timed out after 1 s; stopping the workers\n"))
      << launch.err();
  EXPECT_TRUE(Contains(launch.err(), "chorus-launch: worker 1 exited with code " +
                                         std::to_string(128 + SIGTERM) +
                                         " (killed by SIGTERM: Terminated)\n"))
      << launch.err();
  ExpectAllGone(dir.path(), 2);
}

// --- parameter-server jobs (--ps P --workers W) ---------------------------------------------

// The "task=... address=... ps_cluster=... tf_config=..." lines of launch_probe's print-task, by
// their prefix's task name, as copies of the match's groups (a std::smatch would point into the
// caller's lines, often a temporary); a line whose prefix and task disagree fails the test.
std::map<std::string, std::vector<std::string>> TaskLines(const std::vector<std::string>& lines) {
  static const std::regex line(
      R"(\[(\w+ \d)\] task=(\w+ \d) address=(127\.0\.0\.1:\d+) ps_cluster=(.*) tf_config=(.*))");
  std::map<std::string, std::vector<std::string>> by_task;
  for (const std::string& text : lines) {
    std::smatch match;
    if (!std::regex_match(text, match, line)) {
      ADD_FAILURE() << "not a print-task line: " << text;
      continue;
    }
    EXPECT_EQ(match[1], match[2]) << "the prefix names the task whose line it is";
    by_task[match[2]] = std::vector<std::string>(match.begin(), match.end());
  }
  return by_task;
}

TEST(ChorusLaunch, ParameterServerJobGivesEveryRoleItsTask) {
  TempDir dir;
  Launch launch(dir, {"--ps", "2", "--workers", "2", "--timeout", "60", "--", LAUNCH_PROBE_PATH,
                      "print-task"});
  ASSERT_EQ(launch.Wait(), 0) << launch.err();
  const auto by_task = TaskLines(Lines(launch.out()));
  const std::vector<std::string> tasks = {"chief 0", "worker 0", "worker 1", "ps 0", "ps 1"};
  ASSERT_EQ(by_task.size(), tasks.size()) << launch.out();
  std::vector<std::string> addresses;
  for (const std::string& task : tasks) {
    ASSERT_TRUE(by_task.count(task)) << task << " printed nothing: " << launch.out();
    EXPECT_EQ(by_task.at(task)[4], "ok") << task;
    addresses.push_back(by_task.at(task)[3]);
  }
  EXPECT_EQ(std::set<std::string>(addresses.begin(), addresses.end()).size(), tasks.size());
  const std::string cluster = "{\"cluster\":{\"chief\":[\"" + addresses[0] + "\"],\"worker\":[\"" +
                              addresses[1] + "\",\"" + addresses[2] + "\"],\"ps\":[\"" +
                              addresses[3] + "\",\"" + addresses[4] + "\"]},";
  EXPECT_EQ(by_task.at("ps 1")[5], cluster + "\"task\":{\"type\":\"ps\",\"index\":1}}");
  EXPECT_EQ(by_task.at("chief 0")[5], cluster + "\"task\":{\"type\":\"chief\",\"index\":0}}");
  EXPECT_EQ(launch.err(), "");
}

TEST(ChorusLaunch, ParameterServerJobWithEvaluatorAndPortBase) {
  TempDir dir;
  Launch launch(dir, {"--ps", "1", "--workers", "1", "--evaluator", "--port-base", "23470",
                      LAUNCH_PROBE_PATH, "print-task"});
  ASSERT_EQ(launch.Wait(), 0) << launch.err();
  const auto by_task = TaskLines(Lines(launch.out()));
  ASSERT_EQ(by_task.size(), 4u) << launch.out();
  EXPECT_EQ(by_task.at("chief 0")[3], "127.0.0.1:23470");
  EXPECT_EQ(by_task.at("worker 0")[3], "127.0.0.1:23471");
  EXPECT_EQ(by_task.at("ps 0")[3], "127.0.0.1:23472");
  EXPECT_EQ(by_task.at("evaluator 0")[3], "127.0.0.1:23473");
  EXPECT_EQ(by_task.at("evaluator 0")[5],
            "{\"cluster\":{\"chief\":[\"127.0.0.1:23470\"],\"worker\":[\"127.0.0.1:23471\"],"
            "\"ps\":[\"127.0.0.1:23472\"],\"evaluator\":[\"127.0.0.1:23473\"]},"
            "\"task\":{\"type\":\"evaluator\",\"index\":0}}");
}

// A parameter-server job tolerates its workers' failures: the chief's exit code is the job's.
TEST(ChorusLaunch, AFailingWorkerIsReportedButTheChiefDecides) {
  TempDir dir;
  Launch launch(dir, {"--ps", "2", "--workers", "2", "--timeout", "60", LAUNCH_PROBE_PATH,
                      "print-task", "exit=1@worker:1"});
  EXPECT_EQ(launch.Wait(), 0) << launch.err();
  EXPECT_EQ(launch.err(),
            "chorus-launch: worker 1 exited with code 1; the chief decides what happens\n");
  EXPECT_EQ(TaskLines(Lines(launch.out())).size(), 5u) << launch.out();
}

// Worker 0 is killed while the chief waits for it: the others go on, and the chief ends the job.
TEST(ChorusLaunch, AKilledWorkerDoesNotStopTheOthers) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"--ps", "1", "--workers", "2", "--timeout", "60", LAUNCH_PROBE_PATH, pids,
                      "wait-files=4", "crash=" + std::to_string(SIGKILL) + "@worker:0",
                      "wait-gone=worker0@chief", "print-task"});
  EXPECT_EQ(launch.Wait(), 0) << launch.err();
  EXPECT_EQ(launch.err(),
            "chorus-launch: worker 0 died (signal 9, SIGKILL); the chief decides what happens\n");
  const auto by_task = TaskLines(Lines(launch.out()));
  EXPECT_EQ(by_task.size(), 3u) << launch.out();
  EXPECT_TRUE(by_task.count("chief 0")) << launch.out();
  ExpectAllGone(dir.path(), 4);
}

TEST(ChorusLaunch, AFailingChiefStopsTheOthersWithItsCode) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"--ps", "1", "--workers", "1", "--timeout", "60", LAUNCH_PROBE_PATH, pids,
                      "grandchild", "wait-files=6", "exit=3@chief", "sleep=forever"});
  EXPECT_EQ(launch.Wait(), 3) << launch.err();
  EXPECT_LT(launch.seconds(), 10.0);
  EXPECT_EQ(launch.err(), "chorus-launch: chief 0 exited with code 3; stopping the others\n");
  ExpectAllGone(dir.path(), 6);
}

// The chief exited 0 but a ps task does not stop: after the grace it gets SIGTERM.
TEST(ChorusLaunch, TasksThatOutliveTheChiefAreStoppedAfterTheGrace) {
  TempDir dir;
  const std::string pids = "pid-dir=" + dir.path().string();
  Launch launch(dir, {"--ps", "1", "--workers", "1", "--timeout", "60", LAUNCH_PROBE_PATH, pids,
                      "grandchild", "wait-files=6", "sleep=forever@ps"});
  EXPECT_EQ(launch.Wait(), 0) << launch.err();
  EXPECT_GE(launch.seconds(), 10.0);
  EXPECT_LT(launch.seconds(), 20.0);
  EXPECT_EQ(launch.err(),
            "chorus-launch: tasks still running 10 s after the chief exited; stopping them\n");
  ExpectAllGone(dir.path(), 6);
}

TEST(ChorusLaunch, ParameterServerUsageErrors) {
  TempDir dir;
  Launch both(dir, {"-n", "2", "--ps", "1", "--workers", "1", LAUNCH_PROBE_PATH});
  EXPECT_NE(both.Wait(), 0);
  EXPECT_TRUE(Contains(both.err(), "excludes")) << both.err();
  Launch no_workers(dir, {"--ps", "1", LAUNCH_PROBE_PATH});
  EXPECT_NE(no_workers.Wait(), 0);
  EXPECT_TRUE(Contains(no_workers.err(), "--workers")) << no_workers.err();
  Launch keep_going(dir, {"--ps", "1", "--workers", "1", "--keep-going", LAUNCH_PROBE_PATH});
  EXPECT_NE(keep_going.Wait(), 0);
  EXPECT_TRUE(Contains(keep_going.err(), "--keep-going")) << keep_going.err();
  Launch high_port(dir, {"--ps", "1", "--workers", "2", "--port-base", "65533", LAUNCH_PROBE_PATH});
  EXPECT_EQ(high_port.Wait(), 2);
  EXPECT_EQ(high_port.err(),
            "chorus-launch: --port-base 65533 leaves no room for 4 tasks below port 65536; "
            "choose a lower port base\n");
}

TEST(ChorusLaunch, UsageErrors) {
  TempDir dir;
  Launch no_program(dir, {"-n", "2"});
  EXPECT_EQ(no_program.Wait(), 2);
  EXPECT_TRUE(Contains(no_program.err(), "chorus-launch: no program given; usage: "))
      << no_program.err();
  Launch unknown(dir, {"-n", "2", "--bogus", "prog"});
  EXPECT_EQ(unknown.Wait(), 2);
  EXPECT_EQ(unknown.err(),
            "chorus-launch: unknown option '--bogus'; put '--' before the program if it starts "
            "with '-'\n");
  Launch no_n(dir, {LAUNCH_PROBE_PATH});
  EXPECT_NE(no_n.Wait(), 0);
  EXPECT_TRUE(Contains(no_n.err(), "-n")) << no_n.err();
  Launch zero_timeout(dir, {"-n", "1", "--timeout", "0", LAUNCH_PROBE_PATH});
  EXPECT_NE(zero_timeout.Wait(), 0);
  EXPECT_TRUE(Contains(zero_timeout.err(), "--timeout")) << zero_timeout.err();
  Launch high_port(dir, {"-n", "3", "--port-base", "65534", LAUNCH_PROBE_PATH});
  EXPECT_EQ(high_port.Wait(), 2);
  EXPECT_EQ(high_port.err(),
            "chorus-launch: --port-base 65534 leaves no room for 3 workers below port 65536; "
            "choose a lower port base\n");
}

}  // namespace
