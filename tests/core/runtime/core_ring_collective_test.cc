// The core's reference collective "core_ring" (the ring algorithm over the core's tcp
// transport), called through the builtin plugin's C table with ranks as threads over an
// in-process rendezvous store (the conformance kit's harness): every operation, rank count, element
// count and dtype against exact expected values, then failures (a lost rank, a time-out, abort,
// mismatched sizes).
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ring_test_util.h"

namespace chorus {
namespace {

using namespace ring_test;  // NOLINT: test helpers
using Clock = std::chrono::steady_clock;

const chorus_collective_api& Api() { return *Core().collective(); }
std::string LastError() { return Core().LastError(); }

// Rank `rank` of `size`'s core_ring communicator over `job`, created on the calling thread.
std::unique_ptr<conformance::RankCommunicator> CreateComm(const conformance::ThreadJob& job,
                                                          int rank, int size, int64_t timeout_ms,
                                                          const Options& options = {}) {
  return std::make_unique<conformance::RankCommunicator>(
      CorePlugin(), Api(), job.store(rank), rank, size,
      conformance::CommunicatorSettings(timeout_ms, options));
}

chorus_status AllReduce(chorus_communicator* comm, const void* send, void* recv, size_t count,
                        chorus_dtype dtype, chorus_reduce_op op) {
  chorus_all_reduce_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  chorus_request* request = reinterpret_cast<chorus_request*>(&args);  // must become NULL
  const chorus_status status = Api().all_reduce(comm, &args, &request);
  EXPECT_EQ(request, nullptr);
  return status;
}

chorus_status Broadcast(chorus_communicator* comm, void* data, size_t count, chorus_dtype dtype,
                        int root) {
  chorus_collective_broadcast_args args{};
  args.struct_size = sizeof(args);
  args.data = data;
  args.count = count;
  args.dtype = dtype;
  args.root = root;
  chorus_request* request = nullptr;
  const chorus_status status = Api().broadcast(comm, &args, &request);
  EXPECT_EQ(request, nullptr);
  return status;
}

chorus_status AllGather(chorus_communicator* comm, const void* send, void* recv, size_t count,
                        chorus_dtype dtype) {
  chorus_collective_all_gather_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  chorus_request* request = nullptr;
  const chorus_status status = Api().all_gather(comm, &args, &request);
  EXPECT_EQ(request, nullptr);
  return status;
}

chorus_status ReduceScatter(chorus_communicator* comm, const void* send, void* recv,
                            size_t recv_count, chorus_dtype dtype, chorus_reduce_op op) {
  chorus_reduce_scatter_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.recv_count = recv_count;
  args.dtype = dtype;
  args.op = op;
  chorus_request* request = nullptr;
  const chorus_status status = Api().reduce_scatter(comm, &args, &request);
  EXPECT_EQ(request, nullptr);
  return status;
}

chorus_status Barrier(chorus_communicator* comm) {
  chorus_request* request = nullptr;
  const chorus_status status = Api().barrier(comm, &request);
  EXPECT_EQ(request, nullptr);
  return status;
}

std::string Describe(const char* op, chorus_dtype dtype, chorus_reduce_op reduce, int rank,
                     int size, size_t count) {
  return std::string(op) + " " + DtypeName(dtype) + " " + ReduceOpName(reduce) + " rank " +
         std::to_string(rank) + "/" + std::to_string(size) + " count " + std::to_string(count);
}

// ---- The sweep: every operation for every rank count and element count ----------------------

// Inputs and expected values repeat every kPeriod elements (InputValue's patterns have periods
// 5 and 2), which keeps the sweep's own work small next to the collectives'.
constexpr size_t kPeriod = 10;

void CheckAllReduce(chorus_communicator* comm, int rank, int size, size_t count, chorus_dtype dtype,
                    chorus_reduce_op op, bool in_place) {
  const std::string what =
      Describe(in_place ? "all_reduce in place" : "all_reduce", dtype, op, rank, size, count);
  const std::vector<uint8_t> input =
      Periodic(dtype, count, kPeriod, [&](size_t i) { return InputValue(op, rank, i); });
  std::vector<uint8_t> send = input;
  std::vector<uint8_t> recv = in_place ? send : std::vector<uint8_t>(send.size(), 0xab);
  const chorus_status status =
      AllReduce(comm, in_place ? recv.data() : send.data(), recv.data(), count, dtype, op);
  ASSERT_EQ(status, CHORUS_OK) << what << ": " << LastError();
  ExpectSame(dtype, recv,
             Periodic(dtype, count, kPeriod, [&](size_t i) { return Reduced(op, size, i); }), what);
  if (!in_place) ExpectSame(dtype, send, input, what + " (send must not change)");
}

void CheckBroadcast(chorus_communicator* comm, int rank, int size, size_t count, chorus_dtype dtype,
                    int root) {
  const std::string what = "broadcast " + std::string(DtypeName(dtype)) + " from root " +
                           std::to_string(root) + " rank " + std::to_string(rank) + "/" +
                           std::to_string(size) + " count " + std::to_string(count);
  const std::vector<uint8_t> expected = Periodic(dtype, count, 11, [&](size_t i) {
    return 1.0 + static_cast<double>((i * 7 + static_cast<size_t>(root)) % 11);
  });
  std::vector<uint8_t> data = rank == root ? expected : std::vector<uint8_t>(expected.size(), 0);
  ASSERT_EQ(Broadcast(comm, data.data(), count, dtype, root), CHORUS_OK)
      << what << ": " << LastError();
  ExpectSame(dtype, data, expected, what);
}

// Rank r's all_gather block: repeats every 9 elements, different for every rank.
std::vector<uint8_t> GatherBlock(chorus_dtype dtype, size_t count, int rank) {
  return Periodic(dtype, count, 9, [&](size_t i) {
    return 1.0 + static_cast<double>((i + 5 * static_cast<size_t>(rank)) % 9);
  });
}

void CheckAllGather(chorus_communicator* comm, int rank, int size, size_t count,
                    chorus_dtype dtype) {
  const std::string what = Describe("all_gather", dtype, CHORUS_REDUCE_SUM, rank, size, count);
  const std::vector<uint8_t> send = GatherBlock(dtype, count, rank);
  std::vector<uint8_t> recv(send.size() * static_cast<size_t>(size), 0xcd);
  ASSERT_EQ(AllGather(comm, send.data(), recv.data(), count, dtype), CHORUS_OK)
      << what << ": " << LastError();
  std::vector<uint8_t> expected;
  for (int r = 0; r < size; ++r) {
    const std::vector<uint8_t> block = GatherBlock(dtype, count, r);
    expected.insert(expected.end(), block.begin(), block.end());
  }
  ExpectSame(dtype, recv, expected, what);
}

void CheckReduceScatter(chorus_communicator* comm, int rank, int size, size_t count,
                        chorus_dtype dtype, chorus_reduce_op op) {
  const std::string what = Describe("reduce_scatter", dtype, op, rank, size, count);
  const size_t total = count * static_cast<size_t>(size);
  const std::vector<uint8_t> send =
      Periodic(dtype, total, kPeriod, [&](size_t i) { return InputValue(op, rank, i); });
  std::vector<uint8_t> recv(count * chorus_dtype_size(dtype), 0xef);
  ASSERT_EQ(ReduceScatter(comm, send.data(), recv.data(), count, dtype, op), CHORUS_OK)
      << what << ": " << LastError();
  const size_t first = static_cast<size_t>(rank) * count;
  ExpectSame(
      dtype, recv,
      Periodic(dtype, count, kPeriod, [&](size_t i) { return Reduced(op, size, first + i); }),
      what);
}

class CoreRingSweep : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(CoreRingSweep, EveryOperation) {
  const auto [size, count] = GetParam();
  const conformance::ThreadJob job(size);
  RunRanks(size, [&, size = size, count = count](int rank) {
    const auto comm = CreateComm(job, rank, size, 20000);
    ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
    for (chorus_dtype dtype : AllDtypes()) {
      CheckAllReduce(comm->get(), rank, size, count, dtype, CHORUS_REDUCE_SUM, false);
      CheckAllReduce(comm->get(), rank, size, count, dtype, CHORUS_REDUCE_SUM, true);
      CheckReduceScatter(comm->get(), rank, size, count, dtype, CHORUS_REDUCE_SUM);
      CheckAllGather(comm->get(), rank, size, count, dtype);
    }
    for (chorus_dtype dtype : {CHORUS_F32, CHORUS_I64, CHORUS_U8, CHORUS_BF16}) {
      for (chorus_reduce_op op : {CHORUS_REDUCE_PROD, CHORUS_REDUCE_MIN, CHORUS_REDUCE_MAX}) {
        CheckAllReduce(comm->get(), rank, size, count, dtype, op, false);
      }
      CheckReduceScatter(comm->get(), rank, size, count, dtype, CHORUS_REDUCE_MAX);
    }
    for (int root = 0; root < size; ++root) {
      const std::vector<chorus_dtype> dtypes = AllDtypes();
      CheckBroadcast(comm->get(), rank, size, count,
                     dtypes[static_cast<size_t>(root) % dtypes.size()], root);
      CheckBroadcast(comm->get(), rank, size, count, CHORUS_F16, root);
    }
    for (int i = 0; i < 3; ++i) EXPECT_EQ(Barrier(comm->get()), CHORUS_OK) << LastError();
  });
}

INSTANTIATE_TEST_SUITE_P(CoreRing, CoreRingSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{1001},
                                                              size_t{262147})),
                         [](const ::testing::TestParamInfo<std::tuple<int, size_t>>& info) {
                           return "ranks" + std::to_string(std::get<0>(info.param)) + "_count" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Segments smaller than a chunk, of an odd size, and of less than one element.
// Through the core's Communicator: core_ring's transport listens at the address the communicator
// hands every collective (the cluster spec's), not at 127.0.0.1.
TEST(CoreRing, ListensAtTheAddressTheCoreHandsIt) {
  auto store = MakeInProcessStore();
  RunRanks(2, [&](int rank) {
    CommunicatorConfig config;
    config.rank = rank;
    config.size = 2;
    config.store = store;
    config.timeout_seconds = 10;
    config.address = "127.0.0.2";
    auto comm =
        Communicator::Create(Registry(LoaderOptions{{}, std::string("none")}), "core_ring", config);
    float value = static_cast<float>(rank + 1);
    comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
    EXPECT_EQ(value, 3.0f);
  });
  for (int rank = 0; rank < 2; ++rank) {
    const std::string published =
        ToString(store->Get("comm/default/core_ring/core_ring/1/tcp/addr/" + std::to_string(rank),
                            std::chrono::seconds(5)));
    EXPECT_EQ(published.rfind("127.0.0.2:", 0), 0u) << published;
  }
}

// Create compares the options every rank hands the collective: one that differs fails on every
// rank naming it; one the caller marks per rank (a listen address) may differ.
TEST(CoreRing, CreateComparesOptionsExceptThoseMarkedPerRank) {
  const auto create = [](const Options& rank0, const Options& rank1,
                         const std::vector<std::string>& per_rank) {
    auto store = MakeInProcessStore();
    std::vector<std::string> errors(2);
    RunRanks(2, [&](int rank) {
      CommunicatorConfig config;
      config.rank = rank;
      config.size = 2;
      config.store = store;
      config.timeout_seconds = 10;
      config.task_names = {"worker 0", "worker 1"};
      config.options = rank == 0 ? rank0 : rank1;
      config.per_rank_options = per_rank;
      try {
        auto comm = Communicator::Create(Registry(LoaderOptions{{}, std::string("none")}),
                                         "core_ring", config);
        float value = 1.0f;
        comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
        EXPECT_EQ(value, 2.0f);
      } catch (const Error& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
    return errors;
  };
  for (const std::string& error :
       create({{"segment_bytes", "64"}}, {{"segment_bytes", "128"}}, {})) {
    EXPECT_EQ(error,
              "communicator 'default': worker 1 hands collective 'core_ring' the options "
              "segment_bytes=128 but worker 0 hands it segment_bytes=64; give every worker the "
              "same collective options (CommunicatorConfig.options)");
  }
  for (const std::string& error :
       create({{"host", "127.0.0.1"}}, {{"host", "127.0.0.2"}}, {"host"})) {
    EXPECT_EQ(error, "");
  }
}

TEST(CoreRing, SegmentBytesOption) {
  for (const char* segment_bytes : {"1", "12", "4100"}) {
    const conformance::ThreadJob job(3);
    RunRanks(3, [&](int rank) {
      const auto comm = CreateComm(job, rank, 3, 20000, {{"segment_bytes", segment_bytes}});
      ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
      CheckAllReduce(comm->get(), rank, 3, 1001, CHORUS_F32, CHORUS_REDUCE_SUM, false);
      CheckAllReduce(comm->get(), rank, 3, 1001, CHORUS_F16, CHORUS_REDUCE_MAX, true);
      CheckReduceScatter(comm->get(), rank, 3, 333, CHORUS_I32, CHORUS_REDUCE_SUM);
      CheckAllGather(comm->get(), rank, 3, 333, CHORUS_F64);
      CheckBroadcast(comm->get(), rank, 3, 1001, CHORUS_I64, 1);
    });
  }
}

TEST(CoreRing, BuiltinPluginProvidesCollectiveAlgorithmAndTransport) {
  ASSERT_NE(Core().collective(), nullptr);
  EXPECT_STREQ(Core().collective()->name, "core_ring");
  ASSERT_NE(Core().algorithm(), nullptr);
  EXPECT_STREQ(Core().algorithm()->name, "ring");
  ASSERT_NE(Core().transport(), nullptr);
  EXPECT_STREQ(Core().transport()->name, "tcp");
}

TEST(CoreRing, MeanAndUnknownDtypeAreRejected) {
  const conformance::ThreadJob job(1);
  const auto comm = CreateComm(job, 0, 1, 5000);
  ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
  float data[4] = {1, 2, 3, 4};
  EXPECT_EQ(AllReduce(comm->get(), data, data, 4, CHORUS_F32, CHORUS_REDUCE_MEAN),
            CHORUS_UNSUPPORTED);
  EXPECT_NE(LastError().find("MEAN"), std::string::npos) << LastError();
  EXPECT_EQ(AllReduce(comm->get(), data, data, 4, static_cast<chorus_dtype>(99), CHORUS_REDUCE_SUM),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(Broadcast(comm->get(), data, 4, CHORUS_F32, 1), CHORUS_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("root 1"), std::string::npos) << LastError();
  // A rejected argument does not break the communicator.
  EXPECT_EQ(AllReduce(comm->get(), data, data, 4, CHORUS_F32, CHORUS_REDUCE_SUM), CHORUS_OK);
}

// A communicator made again over the same store (after a failure, say) finds the new addresses,
// not the closed ports of the one before.
TEST(CoreRing, CreatedAgainOverTheSameStore) {
  const conformance::ThreadJob job(3);
  RunRanks(3, [&](int rank) {
    for (int round = 0; round < 3; ++round) {
      const auto comm = CreateComm(job, rank, 3, 5000);
      ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
      CheckAllReduce(comm->get(), rank, 3, 1001, CHORUS_I32, CHORUS_REDUCE_SUM, false);
      if (rank == round) continue;  // leaves before the barrier: the others see it go
      EXPECT_EQ(Barrier(comm->get()), CHORUS_PEER_LOST) << LastError();
    }
  });
}

// ---- Failures ---------------------------------------------------------------------------------

TEST(CoreRing, RankWithAnotherSizeFailsCreate) {
  const conformance::ThreadJob job(2);
  std::vector<chorus_status> statuses(2);
  std::vector<std::string> messages(2);
  RunRanks(2, [&](int rank) {
    const auto comm = CreateComm(job, rank, rank == 1 ? 3 : 2, 3000);
    statuses[static_cast<size_t>(rank)] = comm->status();
    messages[static_cast<size_t>(rank)] = comm->last_error();
  });
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(statuses[rank], CHORUS_INVALID_ARGUMENT) << rank << ": " << messages[rank];
    EXPECT_NE(messages[rank].find("size=3"), std::string::npos) << messages[rank];
    EXPECT_NE(messages[rank].find("size=2"), std::string::npos) << messages[rank];
  }
}

TEST(CoreRing, CreateTimesOutNamingTheMissingRank) {
  const conformance::ThreadJob job(2);
  const auto start = Clock::now();
  const auto comm = CreateComm(job, 0, 2, 300);
  EXPECT_EQ(comm->status(), CHORUS_TIMEOUT);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(comm->last_error().find("rank 1"), std::string::npos) << comm->last_error();
}

TEST(CoreRing, OperationTimesOutNamingTheOpAndThePeer) {
  const conformance::ThreadJob job(2);
  std::atomic<bool> done{false};
  RunRanks(2, [&](int rank) {
    const auto comm = CreateComm(job, rank, 2, 300);
    ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
    if (rank == 1) {  // never joins the all-reduce
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    std::vector<float> data(1000, 1.0f);
    const auto start = Clock::now();
    EXPECT_EQ(AllReduce(comm->get(), data.data(), data.data(), data.size(), CHORUS_F32,
                        CHORUS_REDUCE_SUM),
              CHORUS_TIMEOUT);
    const std::string message = LastError();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
    EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
    // The communicator is unusable afterwards, and says why.
    EXPECT_EQ(Barrier(comm->get()), CHORUS_ABORTED);
    EXPECT_NE(LastError().find("earlier failure"), std::string::npos) << LastError();
    done.store(true);
  });
}

TEST(CoreRing, AbortFromAnotherThreadUnblocksAnOperation) {
  const conformance::ThreadJob job(2);
  std::atomic<bool> done{false};
  RunRanks(2, [&](int rank) {
    const auto comm = CreateComm(job, rank, 2, 20000);
    ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
    if (rank == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Api().abort(comm->get());
    });
    std::vector<double> data(100000, 2.0);
    const auto start = Clock::now();
    EXPECT_EQ(AllReduce(comm->get(), data.data(), data.data(), data.size(), CHORUS_F64,
                        CHORUS_REDUCE_SUM),
              CHORUS_ABORTED);
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
    aborter.join();
    EXPECT_EQ(Barrier(comm->get()), CHORUS_ABORTED);
    done.store(true);
  });
}

// A rank stops participating: its neighbours see its connections close, and the ranks beyond
// them fail because each failed rank closes its own connections in turn. Nobody waits out the
// 20 s time-out.
TEST(CoreRing, RankThatLeavesGivesPeerLostToEveryOtherRank) {
  constexpr int kSize = 5;
  constexpr int kLeaver = 2;
  const conformance::ThreadJob job(kSize);
  std::vector<chorus_status> statuses(kSize, CHORUS_OK);
  std::vector<std::string> messages(kSize);
  std::vector<double> seconds(kSize, 0);
  RunRanks(kSize, [&](int rank) {
    const auto comm = CreateComm(job, rank, kSize, 20000);
    ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
    if (rank == kLeaver) {  // joins no operation and leaves while the others are inside one
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      comm->Destroy();
      return;
    }
    std::vector<float> data(1 << 20, 1.0f);
    const auto start = Clock::now();
    statuses[static_cast<size_t>(rank)] = AllReduce(comm->get(), data.data(), data.data(),
                                                    data.size(), CHORUS_F32, CHORUS_REDUCE_SUM);
    messages[static_cast<size_t>(rank)] = LastError();
    seconds[static_cast<size_t>(rank)] =
        std::chrono::duration<double>(Clock::now() - start).count();
  });
  for (int rank = 0; rank < kSize; ++rank) {
    if (rank == kLeaver) continue;
    const auto r = static_cast<size_t>(rank);
    EXPECT_EQ(statuses[r], CHORUS_PEER_LOST) << "rank " << rank << ": " << messages[r];
    EXPECT_NE(messages[r].find("closed its connection"), std::string::npos) << messages[r];
    EXPECT_LT(seconds[r], 10.0) << "rank " << rank;
  }
}

// A rank's operation is aborted while every rank is inside the same all-reduce.
TEST(CoreRing, RankAbortedMidAllReduceGivesPeerLostToTheOthers) {
  constexpr int kSize = 4;
  constexpr int kAborted = 1;
  constexpr int kLate = 3;  // joins late, so the others are surely mid-operation at the abort
  const conformance::ThreadJob job(kSize);
  std::vector<chorus_status> statuses(kSize, CHORUS_OK);
  std::vector<std::string> messages(kSize);
  RunRanks(kSize, [&](int rank) {
    const auto comm = CreateComm(job, rank, kSize, 20000);
    ASSERT_EQ(comm->status(), CHORUS_OK) << comm->last_error();
    std::thread aborter;
    if (rank == kAborted) {
      aborter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        Api().abort(comm->get());
      });
    }
    if (rank == kLate) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<int32_t> data(1 << 20, 1);
    statuses[static_cast<size_t>(rank)] = AllReduce(comm->get(), data.data(), data.data(),
                                                    data.size(), CHORUS_I32, CHORUS_REDUCE_SUM);
    messages[static_cast<size_t>(rank)] = LastError();
    if (aborter.joinable()) aborter.join();
  });
  for (int rank = 0; rank < kSize; ++rank) {
    const auto r = static_cast<size_t>(rank);
    EXPECT_EQ(statuses[r], rank == kAborted ? CHORUS_ABORTED : CHORUS_PEER_LOST)
        << "rank " << rank << ": " << messages[r];
  }
}

}  // namespace
}  // namespace chorus
