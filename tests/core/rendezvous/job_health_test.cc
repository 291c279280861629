// JobHealth: a dead, a silent and a lost leader's worker, each named with its cause.
#include "store_test_support.h"

namespace chorus {
namespace {

JobHealthOptions HealthOf(const std::string& name, uint16_t port, milliseconds timeout) {
  JobHealthOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.leader_name = "worker 0";
  options.task_name = name;
  options.timeout = timeout;
  options.heartbeat_every = 100ms;
  return options;
}

TEST(JobHealthTest, ADeadWorkerIsNamedAtOnceAndSubscribersHear) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  JobHealth health(HealthOf("worker 0", server->port(), 60s));
  std::atomic<int> calls{0};
  const auto subscription = health.Subscribe([&](const JobFailure&) { ++calls; });
  EXPECT_FALSE(health.Diagnose(CHORUS_TIMEOUT, 5s)) << "every worker answers: no cause";
  CrashAnnouncedClient(server->port(), "worker 2");
  const auto failure = health.Diagnose(CHORUS_PEER_LOST, 5s);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->status, CHORUS_PEER_LOST);
  EXPECT_EQ(failure->worker, "worker 2");
  EXPECT_EQ(failure->cause.rfind("worker 2 died: its process ended", 0), 0u) << failure->cause;
  const auto deadline = Clock::now() + 5s;
  while (calls.load() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(calls.load(), 1);
  health.Unsubscribe(subscription);
}

TEST(JobHealthTest, AWorkerSilentForTheTimeoutIsNamedAsNotAnswering) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  JobHealth health(HealthOf("worker 0", server->port(), 1s));
  const auto stopped = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*stopped, "worker 1");
  tcp_store::ReadHealth(*stopped, 5s);  // one heartbeat, then silence: a stopped process
  const auto start = Clock::now();
  while (!health.failure() && Since(start) < 10s) std::this_thread::sleep_for(20ms);
  const auto failure = health.failure();
  ASSERT_TRUE(failure) << "not named within 10 s";
  EXPECT_GE(Since(start), 900ms) << "named before its silence reached the time-out";
  EXPECT_EQ(failure->status, CHORUS_TIMEOUT);
  EXPECT_EQ(failure->worker, "worker 1");
  EXPECT_EQ(failure->cause.rfind("worker 1 is alive but has not answered for", 0), 0u)
      << failure->cause;
}

TEST(JobHealthTest, ALeaderWhoseStoreIsGoneIsNamedAsDead) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  JobHealth health(HealthOf("worker 1", server->port(), 60s));
  server.reset();  // this process's connections do not hold it
  const auto failure = health.Diagnose(CHORUS_PEER_LOST, 5s);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->status, CHORUS_PEER_LOST);
  EXPECT_EQ(failure->worker, "worker 0");
  EXPECT_EQ(failure->cause.rfind("worker 0 died: the rendezvous store it serves at", 0), 0u)
      << failure->cause;
}

}  // namespace
}  // namespace chorus
