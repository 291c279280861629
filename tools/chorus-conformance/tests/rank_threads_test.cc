// The conformance kit's rank-threads harness (chorus/conformance/rank_threads.h), on the builtin
// plugin's core_ring collective and tcp transport: ranks run at once, failures name their rank,
// groups report create errors with status and message, requests time out and stay live.
#include <chorus/base/error.h>
#include <chorus/conformance/rank_threads.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace chorus::conformance {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<PluginLibrary> Core() {
  static Registry registry(LoaderOptions{{}, std::string("none")});
  return registry.FindPlugin(kBuiltinPluginName);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RankThreads, RanksRunAtOnceAndEachFailureNamesItsRank) {
  constexpr int kRanks = 4;
  std::atomic<int> arrived{0};
  const RankFailures failures = RunRankThreads(kRanks, [&](int rank) -> std::string {
    // Every rank waits here for all the others: only ranks that run at once get past it.
    arrived.fetch_add(1);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (arrived.load() < kRanks) {
      if (Clock::now() > deadline) return "the ranks did not run at once";
      std::this_thread::yield();
    }
    if (rank == 1) return "returned a failure";
    if (rank == 2) throw std::runtime_error("threw");
    return "";
  });
  ASSERT_EQ(failures.size(), kRanks);
  EXPECT_FALSE(failures.ok());
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "rank 1: returned a failure");
  EXPECT_EQ(failures[2], "rank 2: threw");
  EXPECT_EQ(failures[3], "");
  EXPECT_EQ(failures.Joined(), "rank 1: returned a failure\nrank 2: threw\n");
}

TEST(RankThreads, BodiesWithoutAResultPass) {
  std::atomic<int> ran{0};
  const RankFailures failures = RunRankThreads(3, [&](int) { ran.fetch_add(1); });
  EXPECT_TRUE(failures.ok());
  EXPECT_EQ(failures.Joined(), "");
  EXPECT_EQ(ran.load(), 3);
}

TEST(RankThreads, EveryRankHasItsOwnStoreOverOneJob) {
  ThreadJob job(2, "job7/");
  ASSERT_EQ(job.size(), 2);
  EXPECT_NE(job.store(0), job.store(1));
  const char value[] = "v";
  ASSERT_EQ(job.store(0)->set(job.store(0)->ctx, "key", value, 1), CHORUS_OK);
  char read[2] = {};
  size_t size = 0;
  EXPECT_EQ(job.store(1)->get(job.store(1)->ctx, "key", 1000, read, sizeof read, &size), CHORUS_OK);
  EXPECT_EQ(size, 1u);
  EXPECT_EQ(read[0], 'v');
  EXPECT_TRUE(job.shared()->Check("job7/key")) << "the ranks' keys live under the prefix";
}

TEST(RankThreads, CommunicatorGroupCreatesEveryRankAtOnce) {
  const auto core = Core();
  CommunicatorGroup group(core, *core->collective(), 3, CommunicatorSettings(10000));
  ASSERT_EQ(group.CreateError(), "");
  const RankFailures failures = RunRankThreads(3, [&](int rank) -> std::string {
    float value = static_cast<float>(rank + 1);
    chorus_all_reduce_args args{};
    args.struct_size = sizeof(args);
    args.send = &value;
    args.recv = &value;
    args.count = 1;
    args.dtype = CHORUS_F32;
    args.op = CHORUS_REDUCE_SUM;
    chorus_request* request = nullptr;
    std::string message;
    const chorus_status status =
        FinishRequest(*core, core->collective()->all_reduce(group.comm(rank), &args, &request),
                      request, 10000, &message);
    if (status != CHORUS_OK) return std::string(StatusName(status)) + ": " + message;
    return value == 6.0f ? "" : "the sum is " + std::to_string(value) + ", expected 6";
  });
  EXPECT_EQ(failures.Joined(), "");
}

TEST(RankThreads, CommunicatorCreateErrorsNameRankStatusAndMessage) {
  const auto core = Core();
  CommunicatorGroup group(core, *core->collective(), 2,
                          CommunicatorSettings(5000, {{"segment_bytes", "0"}}));
  EXPECT_EQ(group.comm(0), nullptr);
  EXPECT_EQ(group.member(1).status(), CHORUS_INVALID_ARGUMENT);
  const std::string error = group.CreateError();
  EXPECT_TRUE(Contains(error, "rank 0 of 2: create failed with INVALID_ARGUMENT: ")) << error;
  EXPECT_TRUE(Contains(error, "rank 1 of 2: create failed with INVALID_ARGUMENT: ")) << error;
  EXPECT_TRUE(Contains(error, "segment_bytes must be at least 1")) << error;
}

TEST(RankThreads, EndpointGroupRequestsWaitWithATimeOut) {
  const auto core = Core();
  EndpointGroup group(core, *core->transport(), 2);
  ASSERT_EQ(group.CreateError(), "");
  int32_t received = 0;
  PluginRequest receive;
  ASSERT_EQ(StartReceive(*group.endpoint(1), 0, 3, &received, sizeof received, &receive),
            CHORUS_OK);
  const auto start = Clock::now();
  EXPECT_EQ(receive.Wait(100), CHORUS_TIMEOUT);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_FALSE(receive.Done()) << "a receive nobody sent to finished";
  const int32_t sent = 77;
  PluginRequest send;
  ASSERT_EQ(StartSend(*group.endpoint(0), 1, 3, &sent, sizeof sent, &send), CHORUS_OK);
  EXPECT_EQ(send.Wait(10000), CHORUS_OK);
  std::string message;
  EXPECT_EQ(receive.Wait(10000, &message), CHORUS_OK) << message;
  EXPECT_TRUE(receive.Done());
  EXPECT_EQ(received, 77);
  // An operation that fails before it starts: its status, and the plugin's message.
  PluginRequest bad;
  const chorus_status status = StartSend(*group.endpoint(0), 5, 3, &sent, sizeof sent, &bad);
  EXPECT_EQ(status, CHORUS_INVALID_ARGUMENT);
  EXPECT_TRUE(bad.empty());
  EXPECT_EQ(FinishRequest(*core, status, nullptr, 1000, &message), CHORUS_INVALID_ARGUMENT);
  EXPECT_FALSE(message.empty());
}

TEST(RankThreads, EndpointCreateErrorsNameRankStatusAndMessage) {
  const auto core = Core();
  TransportConfig config;
  config.timeout_ms = 2000;
  config.options = {{"interface", "lo"}};  // tcp takes "host", not "interface"
  EndpointGroup group(core, *core->transport(), 2, config);
  EXPECT_EQ(group.endpoint(0), nullptr);
  EXPECT_EQ(group.create_status(0), CHORUS_INVALID_ARGUMENT);
  const std::string error = group.CreateError();
  EXPECT_TRUE(Contains(error, "rank 0 of 2: create failed with INVALID_ARGUMENT: ")) << error;
  EXPECT_TRUE(Contains(error, "interface")) << error;
}

TEST(RankThreads, DestroyingOneEndpointLosesItsPeer) {
  const auto core = Core();
  EndpointGroup group(core, *core->transport(), 2);
  ASSERT_EQ(group.CreateError(), "");
  int32_t value = 0;
  PluginRequest receive;
  ASSERT_EQ(StartReceive(*group.endpoint(1), 0, 1, &value, sizeof value, &receive), CHORUS_OK);
  group.Destroy(0);
  EXPECT_EQ(group.endpoint(0), nullptr);
  EXPECT_EQ(receive.Wait(10000), CHORUS_PEER_LOST);
}

}  // namespace
}  // namespace chorus::conformance
