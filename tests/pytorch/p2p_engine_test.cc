// The PyTorch backend's torch-free parts (chorus_torch_host), ranks as threads of one process:
//   - P2pEngine over the core's tcp transport and an in-process store: batches of sends and
//     receives around a ring and in flight together (sizes 0, 1, odd and 4 MiB; 2 to 4 ranks),
//     a receive whose send never comes, a peer whose engine goes away, the destructor with
//     batches in flight;
//   - RankHealth over an in-process store: every rank alive, ranks whose heartbeat stopped, a
//     rank on this host whose process died.
// Built in every configuration (no torch needed), so that it also runs under ASan and TSan.
#include "p2p_engine.h"

#include <chorus/base/error.h>
#include <chorus/collective/transport_endpoint.h>
#include <chorus/rendezvous/kv_store.h>
#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "rank_health.h"
#include "ring_test_util.h"

namespace chorus::torch_backend {
namespace {

using ring_test::Core;
using ring_test::CorePlugin;
using ring_test::RunRanks;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The engines' own time-out: far beyond what any passing case takes, so that a case which ends
// before it ended at the time-out it set, or at a failure.
constexpr milliseconds kEngineTimeout{20000};
// How long the test waits for a batch's `done` before it calls the engine stuck.
constexpr milliseconds kWait{15000};
constexpr size_t kLarge = 4 << 20;

std::vector<std::string> RankNames(int size) {
  std::vector<std::string> names;
  for (int r = 0; r < size; ++r) names.push_back("rank " + std::to_string(r));
  return names;
}

// Bytes that differ with `seed` (which names sender, receiver and tag) and along the buffer.
std::vector<uint8_t> Pattern(size_t bytes, uint64_t seed) {
  std::vector<uint8_t> data(bytes);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < bytes; i += sizeof x) {
    x ^= x << 13;  // xorshift64
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(data.data() + i, &x, std::min(sizeof x, bytes - i));
  }
  return data;
}

uint64_t Seed(int from, int to, uint64_t tag) {
  return static_cast<uint64_t>(from) * 4096 + static_cast<uint64_t>(to) * 64 + tag;
}

// "" when `got` holds what rank `from` sent rank `to` under `tag`, else the first difference.
std::string Check(const std::vector<uint8_t>& got, int from, int to, uint64_t tag) {
  const std::vector<uint8_t> want = Pattern(got.size(), Seed(from, to, tag));
  if (got == want) return "";
  const size_t at =
      static_cast<size_t>(std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin());
  return "message of " + std::to_string(got.size()) + " bytes from rank " + std::to_string(from) +
         " to rank " + std::to_string(to) + " tag " + std::to_string(tag) + ": byte " +
         std::to_string(at) + " is " + std::to_string(got[at]) + ", expected " +
         std::to_string(want[at]);
}

P2pOp SendOp(int peer, uint64_t tag, std::vector<uint8_t>& data) {
  return P2pOp{true, peer, tag, data.data(), data.size()};
}

P2pOp RecvOp(int peer, uint64_t tag, std::vector<uint8_t>& data) {
  return P2pOp{false, peer, tag, data.data(), data.size()};
}

// What a batch's `done` reported, for the test's threads to wait for.
class Outcome {
 public:
  // The batch's `done`; it keeps this alive, so an engine may outlive the test's reference.
  static P2pEngine::Done Of(const std::shared_ptr<Outcome>& outcome) {
    return [outcome](std::exception_ptr error) { outcome->Report(std::move(error)); };
  }

  // Whether `done` was called within `limit`.
  bool Wait(milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return called_.wait_for(lock, limit, [this] { return calls_ > 0; });
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  chorus_status status() {
    std::lock_guard<std::mutex> lock(mutex_);
    return status_;
  }
  std::string message() {
    std::lock_guard<std::mutex> lock(mutex_);
    return message_;
  }
  // "" when the batch completed, else its status and message (for an assertion's output).
  std::string Failure() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (calls_ == 0) return "done was not called";
    if (status_ == CHORUS_OK) return "";
    return std::string(StatusName(status_)) + ": " + message_;
  }

 private:
  void Report(std::exception_ptr error) {
    chorus_status status = CHORUS_OK;
    std::string message;
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const Error& e) {
        status = e.status();
        message = e.what();
      } catch (const std::exception& e) {
        status = CHORUS_INTERNAL;
        message = std::string("not a chorus::Error: ") + e.what();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++calls_;
      status_ = status;
      message_ = std::move(message);
    }
    called_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable called_;
  int calls_ = 0;
  chorus_status status_ = CHORUS_OK;
  std::string message_;
};

// Run's failure: its status and message (CHORUS_OK and "" when it completed).
std::pair<chorus_status, std::string> RunResult(P2pEngine& engine, std::string what,
                                                std::vector<P2pOp> ops, milliseconds timeout = {}) {
  try {
    engine.Run(std::move(what), std::move(ops), timeout);
    return {CHORUS_OK, ""};
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
}

// One P2pEngine per rank over the core's tcp transport, the endpoints created at once (each
// create waits for the others), the engines destroyed at once.
class EngineGroup {
 public:
  explicit EngineGroup(int size, milliseconds timeout = kEngineTimeout)
      : engines_(static_cast<size_t>(size)) {
    const std::shared_ptr<KvStore> shared = MakeInProcessStore();
    error_ = conformance::RunRankThreads(size, [&](int rank) {
               auto store = std::make_unique<CKvStore>(WithPrefix(shared, "p2p/"));
               TransportConfig config;
               config.rank = rank;
               config.size = size;
               config.store = store->get();
               config.timeout_ms = 10000;
               auto endpoint = TransportEndpoint::Create(CorePlugin(), *Core().transport(), config);
               engines_[static_cast<size_t>(rank)] = std::make_unique<P2pEngine>(
                   std::move(store), std::move(endpoint), RankNames(size), timeout);
             }).Joined();
  }
  ~EngineGroup() {
    const auto failures = conformance::RunRankThreads(
        size(), [this](int rank) { engines_[static_cast<size_t>(rank)].reset(); });
    EXPECT_EQ(failures.Joined(), "");
  }
  EngineGroup(const EngineGroup&) = delete;
  EngineGroup& operator=(const EngineGroup&) = delete;

  int size() const { return static_cast<int>(engines_.size()); }
  // "" when every engine was created.
  const std::string& error() const { return error_; }
  P2pEngine& operator[](int rank) const { return *engines_.at(static_cast<size_t>(rank)); }
  // Destroys rank `rank`'s engine now (a rank that leaves).
  void Destroy(int rank) { engines_.at(static_cast<size_t>(rank)).reset(); }

 private:
  std::vector<std::unique_ptr<P2pEngine>> engines_;
  std::string error_;
};

std::string Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return "";
  return "'" + text + "' does not contain '" + part + "'";
}

// ---- P2pEngine -------------------------------------------------------------------------------

class P2pEngineRing : public testing::TestWithParam<std::tuple<int, size_t>> {};

// Every rank sends to the next and receives from the previous one in one batch: with Start (the
// result through `done`), then with Run the other way round, the receive listed first.
TEST_P(P2pEngineRing, StartAndRunExchangeAroundTheRing) {
  const int size = std::get<0>(GetParam());
  const size_t bytes = std::get<1>(GetParam());
  struct RankBuffers {
    std::vector<uint8_t> out, in, back, got;
  };
  std::vector<RankBuffers> buffers(static_cast<size_t>(size));  // outlive the engines
  EngineGroup group(size);
  ASSERT_EQ(group.error(), "");
  RunRanks(size, [&](int rank) {
    const int next = (rank + 1) % size;
    const int prev = (rank + size - 1) % size;
    auto& [out, in, back, got] = buffers[static_cast<size_t>(rank)];
    out = Pattern(bytes, Seed(rank, next, 1));
    in.assign(bytes, 0xEE);
    auto outcome = std::make_shared<Outcome>();
    group[rank].Start("ring", {SendOp(next, 1, out), RecvOp(prev, 1, in)}, Outcome::Of(outcome));
    ASSERT_TRUE(outcome->Wait(kWait)) << "rank " << rank << ": the batch did not end";
    ASSERT_EQ(outcome->Failure(), "");
    EXPECT_EQ(Check(in, prev, rank, 1), "");

    back = Pattern(bytes, Seed(rank, prev, 2));
    got.assign(bytes, 0xEE);
    const auto [status, message] =
        RunResult(group[rank], "ring back", {RecvOp(next, 2, got), SendOp(prev, 2, back)});
    ASSERT_EQ(status, CHORUS_OK) << message;
    EXPECT_EQ(Check(got, next, rank, 2), "");
  });
}

std::string RanksAndBytesName(const testing::TestParamInfo<std::tuple<int, size_t>>& info) {
  return "ranks" + std::to_string(std::get<0>(info.param)) + "_bytes" +
         std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(RanksAndSizes, P2pEngineRing,
                         testing::Combine(testing::Values(2, 3, 4),
                                          testing::Values(size_t{0}, size_t{1}, size_t{1001},
                                                          kLarge)),
                         RanksAndBytesName);

class P2pEngineInFlight : public testing::TestWithParam<int> {};

// A rank's messages: [peer][tag - first tag].
using Buffers = std::vector<std::vector<std::vector<uint8_t>>>;

// The size of the messages of tag `tag` (of 1 to 4): the large, odd, one-byte and empty ones.
size_t TagBytes(uint64_t tag) {
  static constexpr size_t kBytes[] = {kLarge, 1001, 1, 0};
  return kBytes[(tag - 1) % 4];
}

// Many batches in flight from every rank, one operation each, with every other rank; the even
// ranks go through the tags forwards, the odd ones backwards:
//   1. every rank sends everything before it receives anything (large messages included), then
//      receives in the opposite of its order;
//   2. every rank posts its receives first (the opposite of its order), then sends everything in
//      one batch.
// One batch after the other (Run), the first could deadlock; the engine must drive them all.
TEST_P(P2pEngineInFlight, SendsBeforeReceivesAndTagsInOtherOrders) {
  const int size = GetParam();
  std::vector<std::pair<Buffers, Buffers>> buffers(static_cast<size_t>(size));  // out, in
  EngineGroup group(size);
  ASSERT_EQ(group.error(), "");
  RunRanks(size, [&](int rank) {
    P2pEngine& engine = group[rank];
    std::vector<uint64_t> tags = {1, 2, 3, 4};
    if (rank % 2 == 1) std::reverse(tags.begin(), tags.end());
    std::vector<uint64_t> reversed(tags.rbegin(), tags.rend());

    auto fill = [&](uint64_t first_tag, Buffers& out, Buffers& in) {
      out.assign(static_cast<size_t>(size), {});
      in.assign(static_cast<size_t>(size), {});
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        for (uint64_t tag = first_tag; tag < first_tag + 4; ++tag) {
          out[static_cast<size_t>(peer)].push_back(Pattern(TagBytes(tag), Seed(rank, peer, tag)));
          in[static_cast<size_t>(peer)].emplace_back(TagBytes(tag), 0xEE);
        }
      }
    };
    auto check = [&](uint64_t first_tag, const Buffers& in) {
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        for (uint64_t tag = first_tag; tag < first_tag + 4; ++tag) {
          EXPECT_EQ(Check(in[static_cast<size_t>(peer)][tag - first_tag], peer, rank, tag), "");
        }
      }
    };
    auto wait_all = [&](std::vector<std::shared_ptr<Outcome>>& outcomes, const char* phase) {
      for (auto& outcome : outcomes) {
        ASSERT_TRUE(outcome->Wait(kWait)) << "rank " << rank << ", " << phase << ": stuck";
        ASSERT_EQ(outcome->Failure(), "") << "rank " << rank << ", " << phase;
      }
    };

    // 1. Sends first (tags 1 to 4), each its own batch; then the receives.
    auto& [out, in] = buffers[static_cast<size_t>(rank)];
    fill(1, out, in);
    std::vector<std::shared_ptr<Outcome>> outcomes;
    for (uint64_t tag : tags) {
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        outcomes.push_back(std::make_shared<Outcome>());
        engine.Start("send", {SendOp(peer, tag, out[static_cast<size_t>(peer)][tag - 1])},
                     Outcome::Of(outcomes.back()));
      }
    }
    for (uint64_t tag : reversed) {
      for (int peer = size - 1; peer >= 0; --peer) {
        if (peer == rank) continue;
        outcomes.push_back(std::make_shared<Outcome>());
        engine.Start("receive", {RecvOp(peer, tag, in[static_cast<size_t>(peer)][tag - 1])},
                     Outcome::Of(outcomes.back()));
      }
    }
    wait_all(outcomes, "sends first");
    check(1, in);

    // 2. Receives first (tags 11 to 14), each its own batch, in the order opposite to the
    // peers' sends; then every send in one batch.
    fill(11, out, in);
    outcomes.clear();
    for (uint64_t tag : reversed) {
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        outcomes.push_back(std::make_shared<Outcome>());
        engine.Start("receive", {RecvOp(peer, tag + 10, in[static_cast<size_t>(peer)][tag - 1])},
                     Outcome::Of(outcomes.back()));
      }
    }
    std::vector<P2pOp> sends;
    for (uint64_t tag : tags) {
      for (int peer = 0; peer < size; ++peer) {
        if (peer != rank)
          sends.push_back(SendOp(peer, tag + 10, out[static_cast<size_t>(peer)][tag - 1]));
      }
    }
    outcomes.push_back(std::make_shared<Outcome>());
    engine.Start("sends", std::move(sends), Outcome::Of(outcomes.back()));
    wait_all(outcomes, "receives first");
    check(11, in);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, P2pEngineInFlight, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int>& info) {
                           return "ranks" + std::to_string(info.param);
                         });

// A receive whose send never comes fails at its batch's time-out with CHORUS_TIMEOUT, naming the
// operation and the peer; the engine is then aborted: a later batch fails at once with
// CHORUS_ABORTED, naming the first failure.
TEST(P2pEngine, UnmatchedReceiveTimesOutThenLaterBatchesAbort) {
  std::vector<uint8_t> in(64), out = Pattern(8, 1);  // outlive the engines
  EngineGroup group(2);
  ASSERT_EQ(group.error(), "");
  const auto start = Clock::now();
  const auto [status, message] =
      RunResult(group[0], "recv from 1", {RecvOp(1, 5, in)}, milliseconds(1000));
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(status, CHORUS_TIMEOUT) << message;
  EXPECT_EQ(Contains(message, "recv from 1: did not complete within its time-out of 1 s"), "");
  EXPECT_EQ(Contains(message, "(still waiting: receive of 64 bytes from rank 1)"), "");
  // The batch's time-out, not the engine's.
  EXPECT_GE(elapsed, milliseconds(1000));
  EXPECT_LT(elapsed, kEngineTimeout / 2);

  const auto later_start = Clock::now();
  const auto [later_status, later_message] = RunResult(group[0], "later", {SendOp(1, 6, out)});
  EXPECT_EQ(later_status, CHORUS_ABORTED) << later_message;
  EXPECT_EQ(Contains(later_message, "later: an earlier point-to-point operation"), "");
  EXPECT_EQ(Contains(later_message, "(recv from 1: did not complete"), "");
  EXPECT_EQ(Contains(later_message, "receive of 64 bytes from rank 1"), "");
  EXPECT_LT(Clock::now() - later_start, kEngineTimeout / 2);
  // An empty batch as well: the engine is done.
  EXPECT_EQ(RunResult(group[0], "empty", {}).first, CHORUS_ABORTED);
}

// A batch in flight when another fails ends then too (the endpoint is aborted), with a message
// that names the first failure, not only "aborted".
TEST(P2pEngine, BatchesInFlightAtTheFirstFailureEndNamingIt) {
  std::vector<uint8_t> pending(32), unmatched(64);  // outlive the engines
  EngineGroup group(2);
  ASSERT_EQ(group.error(), "");
  auto in_flight = std::make_shared<Outcome>();
  group[0].Start("gather from rank 1", {RecvOp(1, 7, pending)}, Outcome::Of(in_flight));
  const auto [status, message] =
      RunResult(group[0], "recv from 1", {RecvOp(1, 5, unmatched)}, milliseconds(1000));
  EXPECT_EQ(status, CHORUS_TIMEOUT) << message;
  ASSERT_TRUE(in_flight->Wait(kWait));
  EXPECT_EQ(in_flight->status(), CHORUS_ABORTED) << in_flight->message();
  EXPECT_EQ(Contains(in_flight->message(), "gather from rank 1: receive of 32 bytes from rank 1"),
            "");
  EXPECT_EQ(Contains(in_flight->message(), "recv from 1: did not complete"), "");
  EXPECT_EQ(Contains(in_flight->message(), "receive of 64 bytes from rank 1"), "");
}

// A peer whose engine (and so its endpoint) is destroyed: a pending receive from it fails with
// CHORUS_PEER_LOST naming it, long before the batch's time-out; later batches abort.
TEST(P2pEngine, DestroyedPeerFailsAPendingReceiveWithPeerLost) {
  constexpr milliseconds kBatchTimeout{10000};
  std::vector<uint8_t> in(1001), out = Pattern(8, 2);  // outlive the engines
  EngineGroup group(3);
  ASSERT_EQ(group.error(), "");
  // Every pair has talked once.
  RunRanks(3, [&](int rank) {
    std::vector<P2pOp> ops;
    std::vector<std::vector<uint8_t>> buffers;
    buffers.reserve(6);
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == rank) continue;
      buffers.push_back(Pattern(16, Seed(rank, peer, 1)));
      ops.push_back(SendOp(peer, 1, buffers.back()));
      buffers.emplace_back(16);
      ops.push_back(RecvOp(peer, 1, buffers.back()));
    }
    const auto [status, message] = RunResult(group[rank], "warm-up", std::move(ops));
    EXPECT_EQ(status, CHORUS_OK) << message;
  });

  auto outcome = std::make_shared<Outcome>();
  group[0].Start("recv from 1", {RecvOp(1, 2, in)}, Outcome::Of(outcome), kBatchTimeout);
  const auto start = Clock::now();
  group.Destroy(1);
  ASSERT_TRUE(outcome->Wait(kWait));
  EXPECT_LT(Clock::now() - start, kBatchTimeout / 2);
  EXPECT_EQ(outcome->status(), CHORUS_PEER_LOST) << outcome->message();
  EXPECT_EQ(Contains(outcome->message(), "recv from 1: receive of 1001 bytes from rank 1: "), "");
  EXPECT_EQ(Contains(outcome->message(), "rank 1 closed its connection"), "");

  const auto [status, message] = RunResult(group[0], "send to 2", {SendOp(2, 3, out)});
  EXPECT_EQ(status, CHORUS_ABORTED) << message;
  EXPECT_EQ(Contains(message, "receive of 1001 bytes from rank 1"), "");
}

// The destructor with batches in flight returns once each has ended (at the latest at its
// time-out; the first time-out aborts the rest) and has called every batch's `done` once.
TEST(P2pEngine, DestructorEndsBatchesInFlightAndCallsEveryDone) {
  std::vector<uint8_t> a(8), b(1001), c = Pattern(8, 3), e(kLarge);  // outlive the engines
  EngineGroup group(2);
  ASSERT_EQ(group.error(), "");
  std::vector<std::shared_ptr<Outcome>> out;
  for (int i = 0; i < 5; ++i) out.push_back(std::make_shared<Outcome>());
  group[0].Start("a", {RecvOp(1, 1, a)}, Outcome::Of(out[0]), milliseconds(1000));
  group[0].Start("b", {RecvOp(1, 2, b)}, Outcome::Of(out[1]), milliseconds(1500));
  group[0].Start("c", {SendOp(1, 3, c)}, Outcome::Of(out[2]));
  group[0].Start("d", {}, Outcome::Of(out[3]));
  group[0].Start("e", {RecvOp(1, 4, e)}, Outcome::Of(out[4]));  // the engine's time-out
  const auto start = Clock::now();
  group.Destroy(0);
  EXPECT_LT(Clock::now() - start, kEngineTimeout / 2);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i]->calls(), 1) << "batch " << i;
  EXPECT_EQ(out[0]->status(), CHORUS_TIMEOUT) << out[0]->message();
  EXPECT_EQ(Contains(out[0]->message(), "a: did not complete"), "");
  EXPECT_EQ(Contains(out[0]->message(), "receive of 8 bytes from rank 1"), "");
  // Aborted by a's time-out (or timed out themselves, should a's come late).
  for (size_t i : {size_t{1}, size_t{4}}) {
    EXPECT_TRUE(out[i]->status() == CHORUS_ABORTED || out[i]->status() == CHORUS_TIMEOUT)
        << out[i]->Failure();
  }
  // The send may have been delivered to rank 1's transport before the abort.
  EXPECT_TRUE(out[2]->status() == CHORUS_OK || out[2]->status() == CHORUS_ABORTED)
      << out[2]->Failure();
  EXPECT_EQ(out[3]->Failure(), "");
}

// ---- RankHealth ------------------------------------------------------------------------------

constexpr milliseconds kWithin{1600};  // a verdict needs at least three heartbeats (1.5 s)
const std::string kScope = "job/health/";

// The RankHealth of each rank of `hosts` that `create` says, created at once (each waits for
// every rank's process entry).
std::vector<std::unique_ptr<RankHealth>> CreateHealth(const std::shared_ptr<KvStore>& store,
                                                      const std::vector<std::string>& hosts,
                                                      const std::vector<bool>& create) {
  const int size = static_cast<int>(hosts.size());
  std::vector<std::unique_ptr<RankHealth>> ranks(hosts.size());
  const auto failures = conformance::RunRankThreads(size, [&](int rank) {
    if (!create[static_cast<size_t>(rank)]) return;
    ranks[static_cast<size_t>(rank)] = std::make_unique<RankHealth>(
        store, kScope, rank, hosts, RankNames(size), milliseconds(10000));
  });
  EXPECT_EQ(failures.Joined(), "");
  return ranks;
}

TEST(RankHealth, EveryRankAliveGivesNoCause) {
  const std::vector<std::string> hosts = {"a", "a", "b"};
  auto ranks = CreateHealth(MakeInProcessStore(), hosts, {true, true, true});
  ASSERT_TRUE(ranks[0] && ranks[1] && ranks[2]);
  RunRanks(3,
           [&](int rank) { EXPECT_EQ(ranks[static_cast<size_t>(rank)]->Diagnose(kWithin), ""); });
}

// Ranks whose RankHealth is gone (their heartbeat stands still) are named by every other, on
// this host by process id (which is alive: the same process), elsewhere by host; the cause is
// kept.
TEST(RankHealth, RanksWhoseHeartbeatStoppedAreNamed) {
  const std::vector<std::string> hosts = {"a", "a", "a", "b"};
  auto ranks = CreateHealth(MakeInProcessStore(), hosts, {true, true, true, true});
  ASSERT_TRUE(ranks[0] && ranks[1] && ranks[2] && ranks[3]);
  ranks[2].reset();
  ranks[3].reset();
  const std::string pid = std::to_string(getpid());
  std::vector<std::string> causes(2);
  RunRanks(2, [&](int rank) {
    causes[static_cast<size_t>(rank)] = ranks[static_cast<size_t>(rank)]->Diagnose(kWithin);
  });
  for (int rank = 0; rank < 2; ++rank) {
    const std::string& cause = causes[static_cast<size_t>(rank)];
    EXPECT_EQ(Contains(cause, "rank 2 (pid " + pid + " on this host) stopped answering"), "");
    EXPECT_EQ(Contains(cause, "rank 3 (on host b) stopped answering"), "");
    EXPECT_EQ(cause.find("rank " + std::to_string(1 - rank) + " ("), std::string::npos) << cause;
    EXPECT_EQ(cause.find("on this host) died"), std::string::npos) << cause;
    // Kept: the same answer again.
    EXPECT_EQ(ranks[static_cast<size_t>(rank)]->Diagnose(kWithin), cause);
  }
}

// The start time (field 22 of /proc/<pid>/stat) of process `pid`, "" when there is none.
std::string StartTime(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(file, text)) return "";
  const size_t end_of_name = text.rfind(')');
  if (end_of_name == std::string::npos) return "";
  std::istringstream fields(text.substr(end_of_name + 1));
  std::string field;
  for (int number = 3; number <= 22 && fields >> field; ++number) {
    if (number == 22) return field;
  }
  return "";
}

// A rank on this host whose process is gone: its published process entry names a child that
// exited and was reaped. The others say it died, by process id.
TEST(RankHealth, RankWhoseProcessOnThisHostDiedIsNamed) {
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) _exit(0);
  const std::string start_time = StartTime(child);  // a zombie until reaped
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  EXPECT_NE(start_time, "");

  const std::shared_ptr<KvStore> store = MakeInProcessStore();
  store->Set(kScope + "process/2", ToBytes(std::to_string(child) + " " + start_time));
  auto ranks = CreateHealth(store, {"a", "a", "a"}, {true, true, false});
  ASSERT_TRUE(ranks[0] && ranks[1]);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string cause = ranks[static_cast<size_t>(rank)]->Diagnose(kWithin);
    EXPECT_EQ(Contains(cause, "rank 2 (pid " + std::to_string(child) + " on this host) died"), "");
    EXPECT_EQ(cause.find("rank " + std::to_string(1 - rank) + " ("), std::string::npos) << cause;
  }
}

}  // namespace
}  // namespace chorus::torch_backend
