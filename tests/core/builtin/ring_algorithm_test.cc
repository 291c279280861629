// The builtin plugin's "ring" algorithm run over a p2p that is not the core's tcp: an in-memory
// fabric between threads. Shows that the algorithm needs nothing but chorus_p2p, and exercises
// segment sizes down to one element without sockets in the way.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ring_test_util.h"

namespace chorus {
namespace {

using namespace ring_test;  // NOLINT: test helpers

// Point-to-point between threads: a send copies its data into the mailbox of (from, to, tag) and
// completes; the i-th receive posted on a mailbox takes the mailbox's i-th message. Like the
// core's p2p, the first failure stops the whole fabric, so every pending request finishes.
class Fabric {
 public:
  explicit Fabric(int size) : ranks_(static_cast<size_t>(size)) {
    for (int r = 0; r < size; ++r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      rank.fabric = this;
      rank.table.struct_size = sizeof(chorus_p2p);
      rank.table.ctx = &rank;
      rank.table.rank = r;
      rank.table.size = size;
      rank.table.isend = [](void* ctx, const chorus_p2p_args* a, chorus_p2p_request** out) {
        return static_cast<Rank*>(ctx)->fabric->Post(*static_cast<Rank*>(ctx), true, *a, out);
      };
      rank.table.irecv = [](void* ctx, const chorus_p2p_args* a, chorus_p2p_request** out) {
        return static_cast<Rank*>(ctx)->fabric->Post(*static_cast<Rank*>(ctx), false, *a, out);
      };
      rank.table.wait = [](void* ctx, chorus_p2p_request* r, int64_t timeout_ms) {
        int done = 0;
        return static_cast<Rank*>(ctx)->fabric->Finish(Cast(r), timeout_ms, false, &done);
      };
      rank.table.test = [](void* ctx, chorus_p2p_request* r, int* done) {
        return static_cast<Rank*>(ctx)->fabric->Finish(Cast(r), 0, true, done);
      };
      rank.table.free = [](void*, chorus_p2p_request* r) { delete Cast(r); };
    }
  }
  const chorus_p2p* p2p(int rank) const { return &ranks_[static_cast<size_t>(rank)].table; }

 private:
  struct Rank {
    Fabric* fabric = nullptr;
    chorus_p2p table{};
  };
  using Key = std::tuple<int, int, uint64_t>;  // from, to, tag
  struct Request {
    bool send;
    Key key;
    void* data;
    size_t bytes;
    size_t index;  // receives: which message of the mailbox
  };
  static Request* Cast(chorus_p2p_request* r) { return reinterpret_cast<Request*>(r); }

  chorus_status Post(const Rank& rank, bool send, const chorus_p2p_args& a,
                     chorus_p2p_request** out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return CHORUS_ABORTED;
    const int me = rank.table.rank;
    auto* request = new Request{send, send ? Key{me, a.peer, a.tag} : Key{a.peer, me, a.tag},
                                a.data, a.bytes, 0};
    if (send) {
      const auto* bytes = static_cast<const uint8_t*>(a.data);
      mail_[request->key].emplace_back(bytes, bytes + a.bytes);
      changed_.notify_all();
    } else {
      request->index = posted_[request->key]++;
    }
    *out = reinterpret_cast<chorus_p2p_request*>(request);
    return CHORUS_OK;
  }

  // wait (test = false) or test (test = true).
  chorus_status Finish(Request* r, int64_t timeout_ms, bool test, int* done) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto ready = [&] { return r->send || mail_[r->key].size() > r->index; };
    if (!changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return ready() || stopped_; })) {
      *done = 0;
      if (test) return CHORUS_OK;
      Stop();
      return CHORUS_TIMEOUT;
    }
    *done = 1;
    if (!ready()) return CHORUS_ABORTED;
    if (r->send) return CHORUS_OK;
    const std::vector<uint8_t>& message = mail_[r->key][r->index];
    if (message.size() != r->bytes) {
      Stop();
      return CHORUS_INVALID_ARGUMENT;
    }
    if (!message.empty()) std::memcpy(r->data, message.data(), message.size());
    return CHORUS_OK;
  }

  void Stop() {
    stopped_ = true;
    changed_.notify_all();
  }

  std::vector<Rank> ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, std::vector<std::vector<uint8_t>>> mail_;
  std::map<Key, size_t> posted_;
  bool stopped_ = false;
};

const chorus_algorithm_api& Ring() { return *Core().algorithm(); }

chorus_status RunRing(const chorus_p2p* p2p, chorus_collective_op op, const void* send, void* recv,
                      size_t count, chorus_dtype dtype, chorus_reduce_op reduce, int root,
                      const std::vector<chorus_option>& options, int64_t timeout_ms = 10000) {
  chorus_algorithm_run_args args{};
  args.struct_size = sizeof(args);
  args.op = op;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  args.op_reduce = reduce;
  args.root = root;
  args.p2p = p2p;
  args.timeout_ms = timeout_ms;
  args.options = options.data();
  args.num_options = options.size();
  return Ring().run(&args);
}

TEST(RingAlgorithm, TableAdvertisesEveryOperation) {
  EXPECT_STREQ(Ring().name, "ring");
  EXPECT_EQ(Ring().supported_ops,
            CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) | CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
                CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER) | CHORUS_OP_BIT(CHORUS_OP_REDUCE_SCATTER) |
                CHORUS_OP_BIT(CHORUS_OP_BARRIER));
}

class RingAlgorithmOverMemory
    : public ::testing::TestWithParam<std::tuple<int, size_t, const char*>> {};

TEST_P(RingAlgorithmOverMemory, EveryOperation) {
  const int size = std::get<0>(GetParam());
  const size_t count = std::get<1>(GetParam());
  const char* const segment_bytes = std::get<2>(GetParam());
  const std::vector<chorus_option> options = {{"segment_bytes", segment_bytes}};
  Fabric fabric(size);
  RunRanks(size, [&](int rank) {
    const chorus_p2p* p2p = fabric.p2p(rank);
    for (chorus_dtype dtype : {CHORUS_F32, CHORUS_I64, CHORUS_F16}) {
      for (chorus_reduce_op op : {CHORUS_REDUCE_SUM, CHORUS_REDUCE_MAX}) {
        const std::string what = std::string(DtypeName(dtype)) + " " + ReduceOpName(op) + " rank " +
                                 std::to_string(rank) + "/" + std::to_string(size) + " count " +
                                 std::to_string(count) + " segment " + segment_bytes;
        // all_reduce, in place.
        auto data = Filled(dtype, count, [&](size_t i) { return InputValue(op, rank, i); });
        ASSERT_EQ(RunRing(p2p, CHORUS_OP_ALL_REDUCE, data.data(), data.data(), count, dtype, op, 0,
                          options),
                  CHORUS_OK)
            << what << ": " << Core().LastError();
        ExpectValues(
            dtype, data, count, [&](size_t i) { return Reduced(op, size, i); },
            "all_reduce " + what);
        // reduce_scatter.
        const size_t n = static_cast<size_t>(size);
        auto send = Filled(dtype, count * n, [&](size_t i) { return InputValue(op, rank, i); });
        std::vector<uint8_t> block(count * chorus_dtype_size(dtype));
        ASSERT_EQ(RunRing(p2p, CHORUS_OP_REDUCE_SCATTER, send.data(), block.data(), count, dtype,
                          op, 0, options),
                  CHORUS_OK)
            << what << ": " << Core().LastError();
        const size_t first = static_cast<size_t>(rank) * count;
        ExpectValues(
            dtype, block, count, [&](size_t i) { return Reduced(op, size, first + i); },
            "reduce_scatter " + what);
      }
      // all_gather, with the own block already in place.
      const size_t n = static_cast<size_t>(size);
      auto gathered = Filled(dtype, count * n, [&](size_t i) {
        return i / count == static_cast<size_t>(rank) ? 1.0 + static_cast<double>(i % 7) : 0.0;
      });
      uint8_t* own = gathered.data() + static_cast<size_t>(rank) * count * chorus_dtype_size(dtype);
      ASSERT_EQ(RunRing(p2p, CHORUS_OP_ALL_GATHER, own, gathered.data(), count, dtype,
                        CHORUS_REDUCE_SUM, 0, options),
                CHORUS_OK)
          << Core().LastError();
      ExpectValues(
          dtype, gathered, count * n, [&](size_t i) { return 1.0 + static_cast<double>(i % 7); },
          "all_gather");
      // broadcast from the last rank.
      auto data = Filled(dtype, count, [&](size_t i) {
        return rank == size - 1 ? 2.0 + static_cast<double>(i % 5) : 0.0;
      });
      ASSERT_EQ(RunRing(p2p, CHORUS_OP_BROADCAST, nullptr, data.data(), count, dtype,
                        CHORUS_REDUCE_SUM, size - 1, options),
                CHORUS_OK)
          << Core().LastError();
      ExpectValues(
          dtype, data, count, [](size_t i) { return 2.0 + static_cast<double>(i % 5); },
          "broadcast");
    }
    EXPECT_EQ(RunRing(p2p, CHORUS_OP_BARRIER, nullptr, nullptr, 0, CHORUS_U8, CHORUS_REDUCE_SUM, 0,
                      options),
              CHORUS_OK)
        << Core().LastError();
  });
}

INSTANTIATE_TEST_SUITE_P(RingAlgorithm, RingAlgorithmOverMemory,
                         ::testing::Combine(::testing::Values(1, 2, 3, 6),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{5},
                                                              size_t{100}),
                                            ::testing::Values("1", "24", "1048576")),
                         [](const auto& info) {
                           return "ranks" + std::to_string(std::get<0>(info.param)) + "_count" +
                                  std::to_string(std::get<1>(info.param)) + "_segment" +
                                  std::get<2>(info.param);
                         });

TEST(RingAlgorithm, BadArgumentsAreRejected) {
  Fabric fabric(2);
  float data[2] = {1, 2};
  const std::vector<chorus_option> none;
  EXPECT_EQ(RunRing(fabric.p2p(0), CHORUS_OP_ALL_REDUCE, data, data, 2, CHORUS_F32,
                    CHORUS_REDUCE_MEAN, 0, none),
            CHORUS_UNSUPPORTED);
  EXPECT_EQ(RunRing(fabric.p2p(0), CHORUS_OP_BROADCAST, nullptr, data, 2, CHORUS_F32,
                    CHORUS_REDUCE_SUM, 2, none),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(
      RunRing(nullptr, CHORUS_OP_ALL_REDUCE, data, data, 2, CHORUS_F32, CHORUS_REDUCE_SUM, 0, none),
      CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(RunRing(fabric.p2p(0), CHORUS_OP_ALL_REDUCE, data, nullptr, 2, CHORUS_F32,
                    CHORUS_REDUCE_SUM, 0, none),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(RunRing(fabric.p2p(0), static_cast<chorus_collective_op>(9), data, data, 2, CHORUS_F32,
                    CHORUS_REDUCE_SUM, 0, none),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(RunRing(fabric.p2p(0), CHORUS_OP_ALL_REDUCE, data, data, 2, CHORUS_F32,
                    CHORUS_REDUCE_SUM, 0, {{"segment_bytes", "0"}}),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(RunRing(fabric.p2p(0), CHORUS_OP_ALL_REDUCE, data, data, 2, CHORUS_F32,
                    CHORUS_REDUCE_SUM, 0, {{"segment_bytes", "lots"}}),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_NE(Core().LastError().find("segment_bytes"), std::string::npos) << Core().LastError();
}

TEST(RingAlgorithm, TimeoutNamesTheOperationAndThePeer) {
  Fabric fabric(2);  // rank 1 never runs
  std::vector<float> data(100, 1.0f);
  EXPECT_EQ(RunRing(fabric.p2p(0), CHORUS_OP_ALL_REDUCE, data.data(), data.data(), data.size(),
                    CHORUS_F32, CHORUS_REDUCE_SUM, 0, {}, 100),
            CHORUS_TIMEOUT);
  const std::string message = Core().LastError();
  EXPECT_NE(message.find("ring all_reduce"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_NE(message.find("100 ms"), std::string::npos) << message;
}

TEST(RingAlgorithm, RanksThatDisagreeOnTheCountFailInsteadOfMisreducing) {
  Fabric fabric(2);
  std::vector<chorus_status> statuses(2);
  RunRanks(2, [&](int rank) {
    std::vector<float> data(rank == 0 ? 10 : 12, 1.0f);
    statuses[static_cast<size_t>(rank)] =
        RunRing(fabric.p2p(rank), CHORUS_OP_ALL_REDUCE, data.data(), data.data(), data.size(),
                CHORUS_F32, CHORUS_REDUCE_SUM, 0, {}, 5000);
  });
  EXPECT_TRUE(statuses[0] == CHORUS_INVALID_ARGUMENT || statuses[1] == CHORUS_INVALID_ARGUMENT)
      << StatusName(statuses[0]) << " " << StatusName(statuses[1]);
  EXPECT_NE(statuses[0], CHORUS_OK);
  EXPECT_NE(statuses[1], CHORUS_OK);
}

}  // namespace
}  // namespace chorus
