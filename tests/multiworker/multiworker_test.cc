// Multi-process tests on 127.0.0.1: real worker processes with TF_CONFIG, for every collective
// backend built (core_ring, gloo, ring_grpc): every op over every dtype and sizes 0, 1, odd and
// large with 2, 3 and 4 workers; a mismatch across workers is reported; a worker killed with
// SIGKILL in the middle of a long all-reduce makes the others fail with PEER_LOST, in time;
// workers with other choices (CHORUS_COMMUNICATION, CHORUS_ALGORITHM, options) fail at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

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

// Workers whose choices differ fail at once, every one with the same message naming the
// difference, instead of waiting out the time-out (5 s) inside their collectives' rendezvous.
// `choices` are the collective_worker arguments after "choices <backend>", one per worker.
void ExpectEveryWorkerFailsAtOnceWith(const std::string& backend,
                                      const std::vector<std::string>& choices,
                                      const std::string& message,
                                      const std::vector<std::string>& env = {}) {
  std::vector<std::string> args = {"choices", backend};
  args.insert(args.end(), choices.begin(), choices.end());
  std::vector<std::string> environment = {"CHORUS_TIMEOUT_SECONDS=5"};
  environment.insert(environment.end(), env.begin(), env.end());
  const auto start = std::chrono::steady_clock::now();
  WorkerProcesses processes(static_cast<int>(choices.size()), kWorker, args, environment);
  const auto results = processes.Wait(seconds(30));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& result : results) {
    ASSERT_TRUE(result.exited) << Show(results);
    EXPECT_EQ(result.exit_code, 3) << Show(results);
    EXPECT_NE(result.output.find("INVALID_ARGUMENT: communicator 'default': " + message),
              std::string::npos)
        << Show(results);
  }
  EXPECT_LT(took, 5.0) << "the workers took " << took << " s (time-out 5 s)\n" << Show(results);
}

TEST(ChoicesMismatch, AnotherAlgorithmRule) {
  ExpectEveryWorkerFailsAtOnceWith(
      "core_ring", {"CHORUS_ALGORITHM=allreduce:0-1M=core_ring", "-"},
      "worker 1 has no CHORUS_ALGORITHM but worker 0 has "
      "CHORUS_ALGORITHM=allreduce:0-1M=core_ring; give every worker the same CHORUS_ALGORITHM");
}

TEST(ChoicesMismatch, AnotherCollectiveOption) {
  ExpectEveryWorkerFailsAtOnceWith(
      "core_ring", {"-", "option:segment_bytes=4096"},
      "worker 1 hands collective 'core_ring' the options segment_bytes=4096 but worker 0 none; "
      "give every worker the same collective options (CommunicatorConfig.options)");
}

#ifdef CHORUS_HAVE_GLOO
TEST(ChoicesMismatch, AnotherCommunication) {
  ExpectEveryWorkerFailsAtOnceWith(
      "gloo", {"-", "CHORUS_COMMUNICATION=gloo"},
      "worker 1 chose collective 'gloo' (CHORUS_COMMUNICATION=gloo) but worker 0 chose "
      "'core_ring' (AUTO); give every worker the same CHORUS_COMMUNICATION");
}

TEST(ChoicesMismatch, AnotherGlooAlgorithm) {
  ExpectEveryWorkerFailsAtOnceWith(
      "gloo", {"option:algorithm=ring", "option:algorithm=bcube"},
      "worker 1 hands collective 'gloo' the options algorithm=bcube but worker 0 hands it "
      "algorithm=ring; give every worker the same collective options (CommunicatorConfig.options)",
      {"CHORUS_COMMUNICATION=gloo"});
}

// With the signature check off (as chorus-bench runs), worker 1 passes another count: gloo fails
// on both workers with an error naming both calls, instead of aborting the process (Gloo's device
// thread throws on the rank that receives more than it posted).
class UncheckedGlooMismatch
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(UncheckedGlooMismatch, EveryWorkerExitsWithAnErrorNamingBothCalls) {
  const auto& [op, algorithm] = GetParam();
  WorkerProcesses processes(2, kWorker, {"unchecked", "gloo", op, "algorithm=" + algorithm},
                            {"CHORUS_TIMEOUT_SECONDS=5"});
  const auto results = processes.Wait(seconds(30));
  for (const auto& result : results) {
    ASSERT_TRUE(result.exited) << Show(results);
    EXPECT_EQ(result.exit_code, 3) << Show(results);
    EXPECT_NE(result.output.find("INVALID_ARGUMENT"), std::string::npos) << Show(results);
    EXPECT_NE(
        result.output.find("the ranks disagree on the call: rank 0 passes " + op + " of 1000 f32"),
        std::string::npos)
        << Show(results);
    EXPECT_NE(result.output.find("but rank 1 passes " + op + " of 999 f32"), std::string::npos)
        << Show(results);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gloo, UncheckedGlooMismatch,
    ::testing::Values(std::tuple{"all_reduce", "ring"}, std::tuple{"all_reduce", "ring_chunked"},
                      std::tuple{"broadcast", "ring"}, std::tuple{"all_gather", "ring"},
                      std::tuple{"reduce_scatter", "bcube"}),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });
#endif

class KilledWorker : public ::testing::TestWithParam<std::string> {};

// Three workers all-reduce 64 MiB in a loop under MultiWorkerMirroredStrategy (time-out 20 s);
// once all are running, worker 1 is SIGKILLed. Workers 0 and 2 must fail with PEER_LOST naming
// worker 1 within the time-out, and exit. Usually they do within a second or two; a survivor
// blocked inside Gloo, which the health monitor's abort cannot wake (closing Gloo's connections
// wakes no waiter), fails at Gloo's time-out, still naming the lost worker.
TEST_P(KilledWorker, TheOthersFailWithPeerLostNamingIt) {
  const std::string started = std::filesystem::temp_directory_path() /
                              ("chorus_started_" + GetParam() + std::to_string(getpid()));
  std::filesystem::remove_all(started);
  std::filesystem::create_directories(started);
  WorkerProcesses processes(3, kWorker, {"long", GetParam(), started});
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         !(std::filesystem::exists(started + "/started-0") &&
           std::filesystem::exists(started + "/started-1") &&
           std::filesystem::exists(started + "/started-2"))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  processes.Kill(1, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const auto results = processes.Wait(seconds(45));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::filesystem::remove_all(started);
  EXPECT_EQ(results[1].signal, SIGKILL) << Show(results);
  for (int w : {0, 2}) {
    ASSERT_TRUE(results[w].exited)
        << "worker " << w
        << (results[w].signal != 0 ? " died of signal " + std::to_string(results[w].signal)
                                   : std::string(" hung"))
        << "\n"
        << Show(results);
    EXPECT_EQ(results[w].exit_code, 3) << Show(results);
    EXPECT_NE(results[w].output.find("PEER_LOST"), std::string::npos) << Show(results);
    EXPECT_NE(results[w].output.find("worker 1"), std::string::npos) << Show(results);
  }
  EXPECT_LT(took, 30.0) << "the survivors took " << took << " s to notice (time-out 20 s)";
}

INSTANTIATE_TEST_SUITE_P(Backends, KilledWorker, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return NameOf(info.param); });

}  // namespace
}  // namespace chorus::test
