// Multi-process tests on 127.0.0.1: real worker processes with TF_CONFIG, for every collective
// backend built (core_ring, gloo, ring_grpc): every op over every dtype and sizes 0, 1, odd and
// large with 2, 3 and 4 workers; a mismatch across workers is reported; a worker killed
// (SIGKILL) or stopped (SIGSTOP) in the middle of a loop of all-reduces, the leader or another,
// makes every other fail, naming it, within the time-out + 2 s.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>

#include "worker_processes.h"

namespace chorus::test {
namespace {

using std::chrono::seconds;

const std::string kWorker = CHORUS_COLLECTIVE_WORKER;

std::vector<std::string> Backends() {
  std::vector<std::string> backends = {"core_ring"};
#ifdef CHORUS_HAVE_GLOO
  backends.push_back("gloo");
#endif
#ifdef CHORUS_HAVE_RING_GRPC
  backends.push_back("ring_grpc");
#endif
#ifdef CHORUS_HAVE_SHM
  backends.push_back("shm");
#ifdef CHORUS_HAVE_HIERARCHICAL
  // The hierarchical plugin's collective; the worker plays two hosts of 2 (4 workers), two of 1
  // (2 workers) or one of 3 (3 workers).
  backends.push_back("shm+core_ring");
#endif
#endif
  return backends;
}

// A test name: "shm+core_ring" becomes "shm_and_core_ring" (gtest allows no '+').
std::string NameOf(std::string backend) {
  if (const auto plus = backend.find('+'); plus != std::string::npos) {
    backend.replace(plus, 1, "_and_");
  }
  return backend;
}

std::string Show(const std::vector<WorkerResult>& results) {
  std::string text;
  for (size_t i = 0; i < results.size(); ++i) {
    text += "--- worker " + std::to_string(i) + " (exit " + std::to_string(results[i].exit_code) +
            ", signal " + std::to_string(results[i].signal) + "):\n" + results[i].output;
  }
  return text;
}

class EveryOp : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(EveryOp, EveryDtypeAndSizeMatchesTheReference) {
  const auto& [backend, workers] = GetParam();
  WorkerProcesses processes(workers, kWorker, {"sweep", backend});
  const auto results = processes.Wait(seconds(240));
  for (const auto& result : results) {
    ASSERT_TRUE(result.exited) << Show(results);
    EXPECT_EQ(result.exit_code, 0) << Show(results);
    EXPECT_NE(result.output.find(" 0 wrong"), std::string::npos) << Show(results);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EveryOp,
                         ::testing::Combine(::testing::ValuesIn(Backends()),
                                            ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return NameOf(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "_workers";
                         });

class Mismatch : public ::testing::TestWithParam<std::string> {};

TEST_P(Mismatch, DifferentCountsAreReportedByEveryWorker) {
  WorkerProcesses processes(2, kWorker, {"mismatch", GetParam()});
  const auto results = processes.Wait(seconds(60));
  for (const auto& result : results) {
    ASSERT_TRUE(result.exited) << Show(results);
    EXPECT_EQ(result.exit_code, 0) << Show(results);
    EXPECT_NE(result.output.find("INVALID_ARGUMENT"), std::string::npos) << Show(results);
    EXPECT_NE(result.output.find("worker 0 issues all_reduce of 1000 f32 (sum) but worker 1 "
                                 "issues all_reduce of 999 f32 (sum)"),
              std::string::npos)
        << Show(results);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Mismatch, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return NameOf(info.param); });

// A worker that dies (SIGKILL) or stops answering (SIGSTOP), the leader (worker 0, which serves
// the rendezvous store) or another, in the middle of a loop of all-reduces under
// MultiWorkerMirroredStrategy with 3 workers and a short time-out.
struct Fault {
  int worker;
  int signal;  // SIGKILL or SIGSTOP
};

std::string Describe(const Fault& fault) {
  return std::string(fault.signal == SIGKILL ? "SIGKILL" : "SIGSTOP") + " of worker " +
         std::to_string(fault.worker);
}

// What a survivor must say first: the worker and what became of it.
std::string Cause(const Fault& fault) {
  return "failed: worker " + std::to_string(fault.worker) +
         (fault.signal == SIGKILL ? " died" : " is alive but has not answered for");
}

// The sanitizers slow everything down, the failure path included.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kSlack = 4.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr double kSlack = 4.0;
#else
constexpr double kSlack = 2.0;
#endif
#else
constexpr double kSlack = 2.0;
#endif

constexpr double kTimeoutSeconds = 5;

// Runs one fault; returns the failures found, empty when every survivor did as it must.
std::string RunFault(const std::string& backend, const Fault& fault) {
  const std::string started =
      std::filesystem::temp_directory_path() /
      ("chorus_started_" + NameOf(backend) + "_" + std::to_string(getpid()) + "_" +
       std::to_string(fault.signal) + "_" + std::to_string(fault.worker));
  std::filesystem::remove_all(started);
  std::filesystem::create_directories(started);
  WorkerProcesses processes(3, kWorker,
                            {"long", backend, started, std::to_string(kTimeoutSeconds)});
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         !(std::filesystem::exists(started + "/started-0") &&
           std::filesystem::exists(started + "/started-1") &&
           std::filesystem::exists(started + "/started-2"))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::filesystem::remove_all(started);
  const std::string segment_prefix = "chorus-shm-" + std::to_string(processes.pid(0)) + "-";
  processes.Kill(fault.worker, fault.signal);
  const auto signalled = std::chrono::steady_clock::now();
  // Every survivor must have exited by then; the stopped worker is killed by Wait.
  const double bound = kTimeoutSeconds + kSlack;
  std::vector<double> took(3, -1);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double now =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
    bool survivors_done = true;
    for (int w = 0; w < 3; ++w) {
      if (w == fault.worker) continue;
      if (processes.Done(w) && took[w] < 0) took[w] = now;
      survivors_done = survivors_done && processes.Done(w);
    }
    if (survivors_done || now > bound + 20) break;
  }
  if (fault.signal == SIGSTOP) processes.Kill(fault.worker, SIGCONT);
  const auto results = processes.Wait(seconds(0));  // kills what is left, the stopped worker too
  std::string failures;
  const auto fail = [&](const std::string& what) {
    failures += "  " + Describe(fault) + ": " + what + "\n";
  };
  for (int w = 0; w < 3; ++w) {
    if (w == fault.worker) continue;
    const std::string who = "worker " + std::to_string(w);
    if (!results[w].exited || results[w].exit_code != 3) {
      fail(who + " did not fail with a chorus error (exit " + std::to_string(results[w].exit_code) +
           ", signal " + std::to_string(results[w].signal) + ")");
    }
    if (results[w].output.find(Cause(fault)) == std::string::npos) {
      fail(who + " does not lead with '" + Cause(fault) + "'");
    }
    if (took[w] < 0 || took[w] > bound) {
      fail(who + " took " + std::to_string(took[w]) + " s, more than the time-out (" +
           std::to_string(kTimeoutSeconds) + " s) + " + std::to_string(kSlack) + " s");
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().rfind(segment_prefix, 0) == 0) {
      fail("left " + entry.path().string() + " behind");
    }
  }
  if (!failures.empty()) failures += Show(results);
  return failures;
}

class WorkerFault : public ::testing::TestWithParam<std::string> {};

// Each survivor of each fault must fail (a chorus error, exit 3), lead its message with the
// worker that died or stopped answering, by task name, and exit within the time-out + 2 s (more
// under the sanitizers). The four faults run at once, as separate jobs.
TEST_P(WorkerFault, EverySurvivorNamesTheWorkerThatDiedOrStopped) {
  const std::vector<Fault> faults = {{0, SIGKILL}, {1, SIGKILL}, {0, SIGSTOP}, {2, SIGSTOP}};
  std::vector<std::string> failures(faults.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < faults.size(); ++i) {
    threads.emplace_back([&, i] { failures[i] = RunFault(GetParam(), faults[i]); });
  }
  for (auto& thread : threads) thread.join();
  for (size_t i = 0; i < faults.size(); ++i) {
    EXPECT_TRUE(failures[i].empty()) << failures[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, WorkerFault, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return NameOf(info.param); });

}  // namespace
}  // namespace chorus::test
