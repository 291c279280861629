// Multi-process tests on 127.0.0.1: real worker processes with TF_CONFIG, for every collective
// backend built (core_ring, gloo, ring_grpc, shm, shm+core_ring, ring@ucx, rhd@ofi): every op over
// every dtype and sizes 0, 1, odd and large with 2, 3 and 4 workers; a mismatch across workers is
// reported; a worker killed (SIGKILL) or stopped (SIGSTOP) in the middle of a loop of all-reduces,
// the leader or another, makes every other fail, naming it, within the time-out + 2 s; workers with
// other choices (CHORUS_COMMUNICATION, CHORUS_ALGORITHM, options) fail at once.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
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
  // Pairs algorithm@transport (the registry makes them of the plugins' algorithms and
  // transports): the core's ring over UCX, and recursive halving-doubling over libfabric.
#ifdef CHORUS_HAVE_UCX
  backends.push_back("ring@ucx");
#endif
#if defined(CHORUS_HAVE_OFI) && defined(CHORUS_HAVE_ALGORITHMS)
  backends.push_back("rhd@ofi");
#endif
  return backends;
}

// A test name: "shm+core_ring" becomes "shm_and_core_ring", "ring@ucx" "ring_at_ucx" (gtest
// allows neither '+' nor '@').
std::string NameOf(std::string backend) {
  if (const auto plus = backend.find('+'); plus != std::string::npos) {
    backend.replace(plus, 1, "_and_");
  }
  if (const auto at = backend.find('@'); at != std::string::npos) backend.replace(at, 1, "_at_");
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

// A worker that dies (SIGKILL), is preempted (SIGTERM, what a scheduler sends) or stops
// answering (SIGSTOP), the leader (worker 0, which serves the rendezvous store) or another, in
// the middle of a loop of all-reduces under MultiWorkerMirroredStrategy with 3 workers and a
// short time-out. Every plugin of the build is loaded in every worker (the ofi plugin's libfabric
// among them, whose psm provider installs a SIGTERM handler that calls exit()).
struct Fault {
  int worker;
  int signal;  // SIGKILL, SIGTERM or SIGSTOP
};

std::string Describe(const Fault& fault) {
  return std::string(sigabbrev_np(fault.signal)) + " of worker " + std::to_string(fault.worker);
}

// What a survivor must say first: the worker and what became of it.
std::string Cause(const Fault& fault) {
  return "failed: worker " + std::to_string(fault.worker) +
         (fault.signal == SIGSTOP ? " is alive but has not answered for" : " died");
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
  // A preempted worker loads every plugin of the build, as a user's job does (the ofi plugin's
  // libfabric among them, whose psm provider installs a SIGTERM handler that calls exit()).
  std::vector<std::string> env;
  if (fault.signal == SIGTERM) env.push_back("CHORUS_TEST_EVERY_PLUGIN=1");
  WorkerProcesses processes(3, kWorker, {"long", backend, started, std::to_string(kTimeoutSeconds)},
                            env);
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
  // Preempted: ended by the signal itself, promptly, not by a crash or an exit() of a handler.
  if (fault.signal == SIGTERM && results[fault.worker].signal != SIGTERM) {
    fail("the worker did not end by SIGTERM (exit " +
         std::to_string(results[fault.worker].exit_code) + ", signal " +
         std::to_string(results[fault.worker].signal) + ")");
  }
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
// under the sanitizers); a preempted worker ends by its SIGTERM. The faults run at once, as
// separate jobs.
TEST_P(WorkerFault, EverySurvivorNamesTheWorkerThatDiedOrStopped) {
  const std::vector<Fault> faults = {
      {0, SIGKILL}, {1, SIGKILL}, {0, SIGSTOP}, {2, SIGSTOP}, {1, SIGTERM}};
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

// A job whose TF_CONFIG writes its addresses as "[::1]:port" runs on IPv6 loopback.
TEST(Addresses, TwoWorkersOnIPv6Loopback) {
  const int probe = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  const bool has_v6 =
      probe >= 0 && bind(probe, reinterpret_cast<sockaddr*>(&loopback), sizeof(loopback)) == 0;
  if (probe >= 0) close(probe);
  if (!has_v6) GTEST_SKIP() << "this machine has no IPv6 loopback (::1; see ip -6 addr)";
  WorkerProcesses processes(2, kWorker, {"mwms", "core_ring"}, {"CHORUS_TIMEOUT_SECONDS=20"},
                            "[::1]");
  const auto results = processes.Wait(seconds(40));
  for (int w : {0, 1}) {
    EXPECT_EQ(results[w].exit_code, 0) << Show(results);
    EXPECT_NE(results[w].output.find("mwms core_ring worker " + std::to_string(w) + " of 2: right"),
              std::string::npos)
        << Show(results);
  }
}

// Another program listens on the leader's port: the leader fails at once, naming the port, that
// it is in use and where the port comes from. (What the other worker, which reaches that
// program, reports is the store client's handshake's to say; it is not checked here.)
TEST(Addresses, LeaderPortInUseIsNamedByTheLeader) {
  const int squatter = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(squatter, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(squatter, 16), 0);
  ASSERT_EQ(getsockname(squatter, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  WorkerProcesses processes(2, kWorker, {"mwms", "core_ring"}, {"CHORUS_TIMEOUT_SECONDS=3"},
                            "127.0.0.1", port);
  const auto results = processes.Wait(seconds(5));
  close(squatter);
  const std::string p = std::to_string(port);
  // Within the 5 s Wait, or Wait killed it (exited false).
  EXPECT_TRUE(results[0].exited) << Show(results);
  EXPECT_EQ(results[0].exit_code, 3) << Show(results);
  EXPECT_NE(results[0].output.find(
                "collective_worker: UNAVAILABLE: MultiWorkerMirroredStrategy (worker 0, the "
                "leader): rendezvous: cannot serve the tcp store on 127.0.0.1:" +
                p + ": port " + p +
                " is in use by another program (bind: Address already in use); stop that "
                "program or choose a free port (the leader's port comes from TF_CONFIG's "
                "cluster)"),
            std::string::npos)
      << Show(results);
}

#ifdef CHORUS_HAVE_SHM
// The names in /dev/shm that start with `prefix`.
std::vector<std::string> ShmEntries(const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix)) names.push_back(name);
  }
  return names;
}

// The leader (rank 0, which creates the shm segment) is SIGKILLed the moment its segment appears
// in /dev/shm, while the others wait 1 s before they map it (the plugin's test hook): the
// survivors fail, naming the leader, and no segment is left.
TEST(ShmSetUp, LeaderKilledWhileTheOthersAttachLeavesNoSegment) {
  const int watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(watch, 0);
  ASSERT_GE(inotify_add_watch(watch, "/dev/shm", IN_CREATE), 0);
  WorkerProcesses processes(3, kWorker, {"mwms", "shm"},
                            {"CHORUS_TIMEOUT_SECONDS=5", "CHORUS_SHM_TEST_ATTACH_DELAY_MS=1000"});
  const std::string ours = "chorus-shm-" + std::to_string(processes.pid(0)) + "-";
  bool seen = false;
  const auto give_up = std::chrono::steady_clock::now() + seconds(30);
  while (!seen && std::chrono::steady_clock::now() < give_up) {
    pollfd p{watch, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    alignas(inotify_event) char events[4096];
    const ssize_t n = read(watch, events, sizeof(events));
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(events + at);
      if (event->len > 0 && std::string(event->name).starts_with(ours)) seen = true;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  close(watch);
  processes.Kill(0, SIGKILL);
  const auto results = processes.Wait(seconds(20));
  ASSERT_TRUE(seen) << "no " << ours << "* appeared in /dev/shm\n" << Show(results);
  EXPECT_EQ(results[0].signal, SIGKILL) << Show(results);
  for (int w : {1, 2}) {
    EXPECT_TRUE(results[w].exited) << Show(results);
    EXPECT_EQ(results[w].exit_code, 3) << Show(results);
    // The leader died while this worker mapped the segment, or while it read the store, or the
    // other survivor gave up (and removed the segment) first, or it had mapped the segment and
    // then found the leader's store gone (during set-up, or in its first all-reduce); the job's
    // health may have named the leader's death first.
    const std::string& said = results[w].output;
    const bool names_leader =
        said.find("shm create: rank 0 (pid " + std::to_string(processes.pid(0)) +
                  ") left before every rank had mapped the shared memory segment; rank " +
                  std::to_string(w) + " gives up and removes the segment") != std::string::npos ||
        said.find("closed the connection (the leader, 127.0.0.1:" +
                  std::to_string(processes.port(0)) + ", may have exited)") != std::string::npos ||
        said.find("worker 0 died: the rendezvous store it serves at 127.0.0.1:" +
                  std::to_string(processes.port(0)) + " closed the connection") !=
            std::string::npos ||
        said.find(
            "PEER_LOST: collective 'shm' (plugin shm) could not create the communicator of "
            "worker " +
            std::to_string(w) + " (rank " + std::to_string(w) + " of 3): shm: the segment /" +
            ours) != std::string::npos;
    EXPECT_TRUE(names_leader) << Show(results);
  }
  EXPECT_EQ(ShmEntries(ours), std::vector<std::string>{}) << Show(results);
}
#endif

// ---- An outsider ---------------------------------------------------------------------------

// A rendezvous store request frame (core/src/rendezvous/tcp_store_protocol.h), written by hand:
// this test talks to the store as a program that is not chorus would.
std::string StoreFrame(uint8_t op, const std::vector<std::string>& keys) {
  std::string body(1, static_cast<char>(op));
  auto u32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) body.push_back(static_cast<char>(v >> shift));
  };
  u32(static_cast<uint32_t>(keys.size()));
  for (const std::string& key : keys) {
    u32(static_cast<uint32_t>(key.size()));
    body += key;
  }
  u32(0);                // no value
  body.append(8, '\0');  // number
  std::string frame;
  const auto length = static_cast<uint32_t>(body.size());
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(length >> shift));
  return frame + body;
}

int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A process's resident memory (VmRSS), in KiB; 0 when it cannot be read.
long RssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// With and without a job secret: while three workers all-reduce, a local process that is not a
// member connects to the leader's store, says hello as "worker 1" and closes without a goodbye
// (which used to end the job in 0.1 s with "lost worker 1"), and opens three connections that
// declare frames of 128 MiB (which used to grow the leader by 440 MB). The job goes on untouched.
class Outsider : public ::testing::TestWithParam<bool> {};

TEST_P(Outsider, CannotEndOrGrowARunningJob) {
  const bool with_secret = GetParam();
  const std::string started =
      std::filesystem::temp_directory_path() /
      ("chorus_outsider_" + std::to_string(with_secret) + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(started);
  std::filesystem::create_directories(started);
  std::vector<std::string> env;
  if (with_secret) env.push_back("CHORUS_JOB_SECRET=outsider-test-secret-0123456789");
  // Under ASan, freed memory waits in a quarantine that counts in the resident size: without
  // one, what the leader holds is what the measure below sees.
  const char* asan = std::getenv("ASAN_OPTIONS");
  env.push_back(std::string("ASAN_OPTIONS=") + (asan != nullptr ? asan + std::string(":") : "") +
                "quarantine_size_mb=0");
  WorkerProcesses processes(3, kWorker, {"long", "core_ring", started, "10"}, env);
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  auto all_started = [&] {
    for (int w = 0; w < 3; ++w) {
      if (!std::filesystem::exists(started + "/started-" + std::to_string(w))) return false;
    }
    return true;
  };
  while (std::chrono::steady_clock::now() < deadline && !all_started()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(all_started()) << Show(processes.Wait(seconds(1)));

  const int impostor = ConnectTo(processes.port(0));
  ASSERT_GE(impostor, 0);
  const std::string hello = StoreFrame(7, {"worker 1", "pid 1 on elsewhere, 00000000"});
  EXPECT_EQ(send(impostor, hello.data(), hello.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(hello.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  close(impostor);  // no goodbye
  // Three frames declared at 128 MiB, 32 MiB of each sent (until the leader closes the
  // connection): a store that buffered them would hold 96 MiB more.
  const long leader_before = RssKiB(processes.pid(0));
  std::vector<int> hogs;
  for (int i = 0; i < 3; ++i) {
    const int hog = ConnectTo(processes.port(0));
    ASSERT_GE(hog, 0);
    const timeval two_seconds{2, 0};
    setsockopt(hog, SOL_SOCKET, SO_SNDTIMEO, &two_seconds, sizeof two_seconds);
    std::string half = {0x08, 0x00, 0x00, 0x00};
    half.resize(32 << 20, 'x');
    for (size_t sent = 0; sent < half.size();) {
      const ssize_t n = send(hog, half.data() + sent, half.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;  // closed by the leader, or nothing taken for 2 s
      sent += static_cast<size_t>(n);
    }
    hogs.push_back(hog);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const long leader_grew_kib = RssKiB(processes.pid(0)) - leader_before;
  // The workers keep all-reducing: 2.5 s later every one still runs and none has lost anyone.
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  std::vector<std::string> logs;
  std::vector<bool> running;
  for (int w = 0; w < 3; ++w) {
    std::ifstream log(processes.scratch() + "/worker-" + std::to_string(w) + ".log");
    logs.emplace_back(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
    std::ifstream stat("/proc/" + std::to_string(processes.pid(w)) + "/stat");
    std::string pid, name, state;
    stat >> pid >> name >> state;
    running.push_back(stat && state != "Z");
  }
  for (int hog : hogs) close(hog);
  processes.Wait(seconds(1));  // ends them
  std::filesystem::remove_all(started);
  EXPECT_LT(leader_grew_kib, 32 * 1024) << "the leader grew by " << leader_grew_kib << " KiB";
  for (int w = 0; w < 3; ++w) {
    EXPECT_TRUE(running[static_cast<size_t>(w)]) << "worker " << w << " ended:\n" << logs[w];
    EXPECT_EQ(logs[w].find("died"), std::string::npos) << logs[w];
    EXPECT_EQ(logs[w].find("lost"), std::string::npos) << logs[w];
  }
}

INSTANTIATE_TEST_SUITE_P(Rendezvous, Outsider, ::testing::Bool(), [](const auto& info) {
  return info.param ? std::string("with_a_job_secret") : std::string("open");
});

// The TCP sockets of `pid` (its descriptors in /proc/<pid>/fd), as /proc/<pid>/net/tcp and tcp6
// list them: the local and remote ports and the state ("0A" listening, "01" established).
struct TcpSocket {
  int local_port = 0;
  int remote_port = 0;
  std::string state;
};
std::vector<TcpSocket> TcpSocketsOf(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::set<std::string> inodes;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(proc + "/fd", error)) {
    std::error_code unreadable;
    const std::string target = std::filesystem::read_symlink(entry.path(), unreadable).string();
    if (!unreadable && target.starts_with("socket:[")) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  const auto port_of = [](const std::string& address) {
    return std::stoi(address.substr(address.rfind(':') + 1), nullptr, 16);
  };
  std::vector<TcpSocket> sockets;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in(proc + table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, skip, inode;
      fields >> slot >> local >> remote >> state;
      for (int i = 0; i < 5; ++i) fields >> skip;  // tx:rx, tr:when, retrnsmt, uid, timeout
      fields >> inode;
      if (inodes.count(inode) != 0) sockets.push_back({port_of(local), port_of(remote), state});
    }
  }
  return sockets;
}

// The TCP ports `pid` listens on.
std::set<int> ListeningPorts(pid_t pid) {
  std::set<int> ports;
  for (const TcpSocket& socket : TcpSocketsOf(pid)) {
    if (socket.state == "0A") ports.insert(socket.local_port);
  }
  return ports;
}

#ifdef CHORUS_HAVE_GLOO
// ---- An outsider on Gloo's ports ------------------------------------------------------------

// A local process that is not part of the job: while the workers set up, it connects to every
// port they listen on (but the leader's store), `limit` in all, writes bytes that are not Gloo's,
// and keeps every second connection open (the others it closes at once).
class PortIntruder {
 public:
  PortIntruder(const WorkerProcesses& processes, int workers, int limit)
      : thread_([this, &processes, workers, limit] {
          std::set<int> seen;
          for (int w = 0; w < workers; ++w) seen.insert(processes.port(w));
          const std::string junk = "GET / HTTP/1.0\r\nHost: not-a-rank\r\n\r\n";
          while (!stop_.load() && hits_.load() < limit) {
            for (int w = 0; w < workers && hits_.load() < limit; ++w) {
              for (int port : ListeningPorts(processes.pid(w))) {
                if (!seen.insert(port).second || hits_.load() >= limit) continue;
                const int fd = ConnectTo(port);
                if (fd < 0) continue;
                (void)send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
                sockaddr_in self{};
                socklen_t length = sizeof self;
                getsockname(fd, reinterpret_cast<sockaddr*>(&self), &length);
                std::lock_guard<std::mutex> lock(mutex_);
                addresses_.push_back("127.0.0.1:" + std::to_string(ntohs(self.sin_port)));
                if (++hits_ % 2 == 0) {
                  close(fd);
                } else {
                  open_.push_back(fd);
                }
              }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }) {}
  ~PortIntruder() {
    Stop();
    for (int fd : open_) close(fd);
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int hits() const { return hits_.load(); }
  // Its ends of the connections it made, "127.0.0.1:port".
  std::vector<std::string> addresses() {
    std::lock_guard<std::mutex> lock(mutex_);
    return addresses_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> hits_{0};
  std::mutex mutex_;
  std::vector<std::string> addresses_;
  std::vector<int> open_;  // only the thread touches it until it is joined
  std::thread thread_;     // last: it starts once the members above exist
};

// Each rank waits this long between publishing its pairs' addresses and connecting them (the
// plugin's test hook), so that the intruder reaches every pair's listening socket first.
const std::string kGlooConnectDelay = "CHORUS_GLOO_TEST_CONNECT_DELAY_MS=300";

// Three gloo workers of a job with a secret; an outsider connects to all six of the pairs'
// listening sockets of the first set-up, then stops. Gloo would take it for a peer (the job
// failed with "connect ...: Connection refused (the process may have died)"); the ranks find it
// out, set up again on new ports and all-reduce correctly.
TEST(GlooOutsider, OneThatComesOnceIsSetUpAround) {
  WorkerProcesses processes(3, kWorker, {"mwms", "gloo"},
                            {"CHORUS_JOB_SECRET=gloo-outsider-test-secret-0123456789",
                             "CHORUS_TIMEOUT_SECONDS=5", kGlooConnectDelay});
  PortIntruder intruder(processes, 3, 6);
  const auto results = processes.Wait(seconds(60));
  intruder.Stop();
  EXPECT_EQ(intruder.hits(), 6) << Show(results);
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(results[w].exited) << Show(results);
    EXPECT_EQ(results[w].exit_code, 0) << Show(results);
    EXPECT_NE(results[w].output.find("mwms gloo worker " + std::to_string(w) + " of 3: right"),
              std::string::npos)
        << Show(results);
    EXPECT_NE(results[w].output.find("setting up again on new ports (2 of 4)"), std::string::npos)
        << Show(results);
  }
}

// An outsider that connects to every listening socket of every set-up: each rank gives up after
// four, with an error that names the outsider's address, in a few seconds.
TEST(GlooOutsider, OneThatNeverStopsIsNamed) {
  const auto start = std::chrono::steady_clock::now();
  WorkerProcesses processes(3, kWorker, {"mwms", "gloo"},
                            {"CHORUS_JOB_SECRET=gloo-outsider-test-secret-0123456789",
                             "CHORUS_TIMEOUT_SECONDS=5", kGlooConnectDelay});
  PortIntruder intruder(processes, 3, 1000);
  const auto results = processes.Wait(seconds(60));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  intruder.Stop();
  const std::vector<std::string> addresses = intruder.addresses();
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(results[w].exited) << Show(results);
    EXPECT_EQ(results[w].exit_code, 3) << Show(results);
    const std::string& said = results[w].output;
    EXPECT_NE(said.find("UNAVAILABLE: collective 'gloo' (plugin gloo) could not create the "
                        "communicator of worker " +
                        std::to_string(w)),
              std::string::npos)
        << Show(results);
    EXPECT_NE(said.find("an unknown process (not a rank of this job) connected to Gloo's "
                        "listening ports during set-up, in each of 4 attempts"),
              std::string::npos)
        << Show(results);
    const bool names_it = std::any_of(addresses.begin(), addresses.end(), [&](const auto& a) {
      return said.find("connection from " + a) != std::string::npos;
    });
    const bool says_closed =
        said.find("a connection that has already closed") != std::string::npos ||
        said.find("accepted a connection that then closed") != std::string::npos;
    EXPECT_TRUE(names_it || says_closed) << Show(results);
  }
  EXPECT_LT(took, 15.0) << Show(results);
}
#endif

// ---- A worker lost during the start-up -------------------------------------------------------

constexpr int kStartUpWorkers = 4;

// Worker 3 of 4 (MultiWorkerMirroredStrategy, time-out 10 s) dies during the start-up, once
// `reached` says it got there (polled every millisecond); with `stop_first` it is stopped there
// (run in short slices until then, so that the moment cannot pass unseen) and killed half a
// second later, so that the others surely wait for it. Every survivor must fail
// with an error naming it, within 3 s of its death (the health notices a death within a
// heartbeat, half a second): not at the time-out, and not naming no one.
void ExpectTheSurvivorsToNameWorker3(const std::string& backend,
                                     const std::function<bool(const WorkerProcesses&)>& reached,
                                     bool stop_first) {
  WorkerProcesses processes(kStartUpWorkers, kWorker, {"mwms", backend},
                            {"CHORUS_TIMEOUT_SECONDS=10"});
  const int victim = kStartUpWorkers - 1;
  const auto give_up = std::chrono::steady_clock::now() + seconds(30);
  if (stop_first) {
    // Worker 3 runs in slices of 300 us and is looked at only while it is stopped: the others
    // cannot get past the start-up without it, so however slow the look is (it reads
    // /proc/net/tcp) the job cannot end before worker 3 is caught where `reached` says.
    for (;;) {
      processes.Kill(victim, SIGSTOP);
      if (reached(processes) || std::chrono::steady_clock::now() >= give_up) break;
      processes.Kill(victim, SIGCONT);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  } else {
    while (!reached(processes) && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  processes.Kill(victim, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_LT(killed, give_up) << "worker 3 never got there";
  std::vector<double> took(kStartUpWorkers, -1);
  while (std::chrono::steady_clock::now() - killed < seconds(20)) {
    bool all_done = true;
    for (int w = 0; w < victim; ++w) {
      if (took[w] < 0 && processes.Done(w)) {
        took[w] = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
      }
      all_done = all_done && took[w] >= 0;
    }
    if (all_done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto results = processes.Wait(seconds(0));
  for (int w = 0; w < victim; ++w) {
    SCOPED_TRACE("worker " + std::to_string(w));
    EXPECT_TRUE(results[w].exited) << Show(results);
    EXPECT_EQ(results[w].exit_code, 3) << Show(results);
    // Worker 3 first; a survivor that looks after the leader has already ended names it too
    // ("worker 3 and worker 0 died: their processes ended").
    EXPECT_TRUE(std::regex_search(
        results[w].output,
        std::regex("worker 3( and worker [0-9]+)* died: (its process|their processes) ended")))
        << Show(results);
    EXPECT_GE(took[w], 0) << Show(results);
    EXPECT_LT(took[w], 3.0) << Show(results);
  }
}

// Worker 3 is stopped as soon as it has joined the job (its store connection and its health
// connection to the leader are open), and killed while the others wait for it in the start-up's
// rendezvous.
TEST(StartUp, AWorkerKilledInTheRendezvousIsNamedAtOnce) {
  ExpectTheSurvivorsToNameWorker3(
      "core_ring",
      [](const WorkerProcesses& processes) {
        int to_the_leader = 0;
        for (const TcpSocket& socket : TcpSocketsOf(processes.pid(kStartUpWorkers - 1))) {
          if (socket.state == "01" && socket.remote_port == processes.port(0)) ++to_the_leader;
        }
        return to_the_leader >= 2;
      },
      true);
}

#ifdef CHORUS_HAVE_GLOO
// Worker 3 is killed as soon as its Gloo pairs listen: the others wait for it in the store or in
// Gloo's connect, which waits five time-outs for a peer's connection unless the plugin ends it.
TEST(StartUp, AWorkerKilledInGloosCreateIsNamedAtOnce) {
  ExpectTheSurvivorsToNameWorker3(
      "gloo",
      [](const WorkerProcesses& processes) {
        return !ListeningPorts(processes.pid(kStartUpWorkers - 1)).empty();
      },
      false);
}
#endif

// Worker 3 of 4 is killed before it could join: the others fail at the time-out (2 s), naming it.
TEST(StartUp, AWorkerThatNeverCameIsNamedAtTheTimeOut) {
  const auto start = std::chrono::steady_clock::now();
  WorkerProcesses processes(kStartUpWorkers, kWorker, {"mwms", "core_ring"},
                            {"CHORUS_TIMEOUT_SECONDS=2"});
  processes.Kill(kStartUpWorkers - 1, SIGKILL);
  const auto results = processes.Wait(seconds(30));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int w = 0; w < kStartUpWorkers - 1; ++w) {
    SCOPED_TRACE("worker " + std::to_string(w));
    EXPECT_TRUE(results[w].exited) << Show(results);
    EXPECT_EQ(results[w].exit_code, 3) << Show(results);
    EXPECT_NE(results[w].output.find("worker 3 did not join within 2 s"), std::string::npos)
        << Show(results);
  }
  EXPECT_LT(took, 10.0) << Show(results);
}

}  // namespace
}  // namespace chorus::test
