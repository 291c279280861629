// The host's abort flag (plugin.h: abort_requested) with a plugin whose blocking waits end only
// through it ("fake_blocking" has no abort()): the core raises it for the work of one
// communicator when it sees a peer lost or a time-out, and for a strategy destroyed with work in
// flight; other communicators of the process are not touched.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/distribute/strategies.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

namespace chorus {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Before main, so before the first use of the process-wide registry: only the blocking fake.
[[maybe_unused]] const bool kEnvironment = [] {
  setenv("CHORUS_PLUGIN_PATH", FAKE_PLUGIN_DIR, 1);
  setenv("CHORUS_PLUGINS", "fake_blocking", 1);
  return true;
}();

std::unique_ptr<Communicator> Blocking(double timeout_seconds) {
  CommunicatorConfig config;
  config.store = MakeInProcessStore();
  config.timeout_seconds = timeout_seconds;
  return Communicator::Create(Registry::Global(), "fake_blocking", config);
}

// What one all_reduce on another thread ended with, and when.
struct Outcome {
  chorus_status status = CHORUS_OK;
  std::string message;
  std::string plugin_message;  // the plugin's last_error on that thread
  Clock::time_point ended;
};

std::future<Outcome> AllReduceLater(Communicator& comm) {
  return std::async(std::launch::async, [&comm] {
    Outcome outcome;
    float value = 1;
    try {
      comm.AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
    } catch (const Error& e) {
      outcome.status = e.status();
      outcome.message = e.what();
    }
    outcome.plugin_message = Registry::Global().FindPlugin("fake_blocking")->LastError();
    outcome.ended = Clock::now();
    return outcome;
  });
}

TEST(AbortFlag, APluginsBlockingWaitEndsWithinASecondOfAPeerLoss) {
  auto comm = Blocking(60);
  auto pending = AllReduceLater(*comm);
  std::this_thread::sleep_for(milliseconds(300));  // the plugin is waiting by now
  // What the health monitor of MultiWorkerMirroredStrategy does when the store reports a loss.
  const auto seen = Clock::now();
  comm->Abort(CHORUS_PEER_LOST, "lost worker 1: its connection to the rendezvous store closed");
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const Outcome outcome = pending.get();
  EXPECT_LT(outcome.ended - seen, std::chrono::seconds(1));
  EXPECT_EQ(outcome.status, CHORUS_PEER_LOST);
  EXPECT_NE(outcome.message.find("lost worker 1"), std::string::npos) << outcome.message;
  EXPECT_EQ(outcome.plugin_message, "fake_blocking: the host's abort flag ended the wait");
}

TEST(AbortFlag, ATimeoutAbortsTheCommunicator) {
  auto comm = Blocking(0.3);
  float value = 1;
  try {
    comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
    FAIL() << "expected a time-out";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_TIMEOUT);
    EXPECT_NE(std::string(e.what()).find("the communicator is aborted"), std::string::npos)
        << e.what();
  }
  // Every later operation fails at once.
  const auto start = Clock::now();
  EXPECT_THROW(comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM), Error);
  EXPECT_LT(Clock::now() - start, milliseconds(100));
}

TEST(AbortFlag, AnAbortStopsOnlyTheWorkOfItsCommunicator) {
  auto aborted = Blocking(60);
  auto other = Blocking(0.5);
  auto lost = AllReduceLater(*aborted);
  auto untouched = AllReduceLater(*other);
  std::this_thread::sleep_for(milliseconds(200));
  aborted->Abort(CHORUS_PEER_LOST, "lost worker 1");
  EXPECT_EQ(lost.get().status, CHORUS_PEER_LOST);
  // The other communicator's wait runs on until its own time-out.
  const Outcome outcome = untouched.get();
  EXPECT_EQ(outcome.status, CHORUS_TIMEOUT);
  EXPECT_EQ(outcome.plugin_message, "fake_blocking: timed out");
}

TEST(AbortFlag, AStrategyDestroyedWithWorkInFlightEndsIt) {
  auto strategy = std::make_unique<MirroredStrategy>(std::vector<Device>{}, "fake_blocking_ops");
  CrossDeviceOps& ops = strategy->cross_device_ops();
  auto pending = std::async(std::launch::async, [&ops] {
    Outcome outcome;
    float data = 1;
    ReduceSpec spec;
    spec.count = 1;
    spec.inputs = {{0, &data}};
    spec.outputs = {{0, &data}};
    try {
      ops.Reduce(CHORUS_REDUCE_SUM, spec);
    } catch (const Error& e) {
      outcome.status = e.status();
      outcome.message = e.what();
    }
    outcome.ended = Clock::now();
    return outcome;
  });
  std::this_thread::sleep_for(milliseconds(300));
  const auto destroyed = Clock::now();
  strategy.reset();  // waits for the reduce to return, which the abort flag makes it do
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(1)), std::future_status::ready);
  const Outcome outcome = pending.get();
  EXPECT_LT(outcome.ended - destroyed, std::chrono::seconds(1));
  EXPECT_EQ(outcome.status, CHORUS_ABORTED);
  EXPECT_NE(outcome.message.find("was destroyed while the operation was in flight"),
            std::string::npos)
      << outcome.message;
}

// An aborted CrossDeviceOps refuses every later operation at once, and the refusal leaves no
// operation counted in flight (a strategy's destructor waits for that count to reach zero).
TEST(AbortFlag, AnAbortedCrossDeviceOpsRefusesLaterOperationsWithoutCountingThem) {
  MirroredStrategy strategy(std::vector<Device>{}, "fake_blocking_ops");
  CrossDeviceOps& ops = strategy.cross_device_ops();
  ops.Abort("the test aborted it");
  float data = 1;
  ReduceSpec spec;
  spec.count = 1;
  spec.inputs = {{0, &data}};
  spec.outputs = {{0, &data}};
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto start = Clock::now();
    try {
      ops.Reduce(CHORUS_REDUCE_SUM, spec);
      FAIL() << "an aborted CrossDeviceOps ran a reduce";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), CHORUS_ABORTED);
      EXPECT_NE(std::string(e.what()).find("the test aborted it"), std::string::npos) << e.what();
    }
    EXPECT_LT(Clock::now() - start, milliseconds(100));
    EXPECT_EQ(ops.in_flight(), 0);
  }
  EXPECT_TRUE(ops.WaitIdle(milliseconds(10)));
}

}  // namespace
}  // namespace chorus
