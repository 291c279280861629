// Multi-process tests on 127.0.0.1: real worker processes with TF_CONFIG, for every collective
// backend built (core_ring, gloo, ring_grpc): every op over every dtype and sizes 0, 1, odd and
// large with 2, 3 and 4 workers; a mismatch across workers is reported; a worker killed with
// SIGKILL in the middle of a long all-reduce makes the others fail with PEER_LOST, in time.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

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
    // then found the leader's store gone.
    const std::string& said = results[w].output;
    const bool names_leader =
        said.find("shm create: rank 0 (pid " + std::to_string(processes.pid(0)) +
                  ") left before every rank had mapped the shared memory segment; rank " +
                  std::to_string(w) + " gives up and removes the segment") != std::string::npos ||
        said.find("closed the connection (the leader, 127.0.0.1:" +
                  std::to_string(processes.port(0)) + ", may have exited)") != std::string::npos ||
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

}  // namespace
}  // namespace chorus::test
