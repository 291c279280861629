// Every collective against exact expected values: rings of 1 to 4 ranks as threads, counts
// 0, 1, 1001 and 262147, every dtype, every reduce op, in and out of place.
#include <chorus/base/dtype.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "ring_test_support.h"

namespace chorus::ring_grpc::test {
namespace {

constexpr int64_t kTimeoutMs = 30000;
// Small segments, so that even the smaller counts are cut into several pipelined messages.
const Options kSmallSegments = {{"segment_bytes", "65536"}};

const chorus_reduce_op kReduceOps[] = {CHORUS_REDUCE_SUM, CHORUS_REDUCE_PROD, CHORUS_REDUCE_MIN,
                                       CHORUS_REDUCE_MAX};

// Every dtype meets every reduce op at the smaller counts; at the largest count (many segments,
// the same arithmetic) f32 and f16 meet every op and the other dtypes SUM, to keep the test
// fast in Debug builds.
bool Sweeps(size_t count, chorus_dtype dtype, chorus_reduce_op op) {
  return count < 100000 || op == CHORUS_REDUCE_SUM || dtype == CHORUS_F32 || dtype == CHORUS_F16;
}

// Rank `rank`'s element i: small integers, exact in every dtype, and whose reductions over 4
// ranks stay exact (PROD multiplies ones and twos).
double Value(int rank, size_t i, chorus_reduce_op op) {
  if (op == CHORUS_REDUCE_PROD) return static_cast<double>(1 + (i + rank) % 2);
  return static_cast<double>(1 + (i * 7 + static_cast<size_t>(rank) * 3) % 11);
}

std::vector<double> Values(int rank, size_t count, chorus_reduce_op op) {
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = Value(rank, i, op);
  return values;
}

// Every rank's input of `count` elements for `op`, and their elementwise reduction: computed
// once per test, before the ranks start.
struct Data {
  std::vector<std::vector<double>> inputs;  // by rank
  std::vector<double> reduced;
};

Data MakeData(int size, size_t count, chorus_reduce_op op) {
  Data data;
  for (int rank = 0; rank < size; ++rank) data.inputs.push_back(Values(rank, count, op));
  data.reduced = data.inputs[0];
  for (int rank = 1; rank < size; ++rank) {
    for (size_t i = 0; i < count; ++i) {
      data.reduced[i] = Combine(op, data.reduced[i], data.inputs[rank][i]);
    }
  }
  return data;
}

// Elements [begin, begin + count) of `values`.
std::vector<double> Slice(const std::vector<double>& values, size_t begin, size_t count) {
  return std::vector<double>(values.begin() + static_cast<ptrdiff_t>(begin),
                             values.begin() + static_cast<ptrdiff_t>(begin + count));
}

void ExpectEqualBuffers(chorus_dtype dtype, const std::vector<uint8_t>& expected,
                        const std::vector<uint8_t>& actual, const std::string& what) {
  const int64_t first = FirstDifference(dtype, expected, actual);
  EXPECT_EQ(first, -1) << what << " (" << chorus::DtypeName(dtype) << "): first wrong element "
                       << first;
}

struct RingCase {
  int size;
  size_t count;
};

std::string CaseName(const testing::TestParamInfo<RingCase>& info) {
  return "ranks" + std::to_string(info.param.size) + "_count" + std::to_string(info.param.count);
}

class RingCollectives : public testing::TestWithParam<RingCase> {};

TEST_P(RingCollectives, AllReduceEveryDtypeAndOpOutOfPlaceAndInPlace) {
  const int size = GetParam().size;
  const size_t count = GetParam().count;
  std::vector<Data> data;
  for (chorus_reduce_op op : kReduceOps) data.push_back(MakeData(size, count, op));
  RunRing(size, kTimeoutMs, kSmallSegments, [&](int rank, RankCommunicator& comm) {
    for (chorus_dtype dtype : chorus::AllDtypes()) {
      for (size_t o = 0; o < std::size(kReduceOps); ++o) {
        const chorus_reduce_op op = kReduceOps[o];
        if (!Sweeps(count, dtype, op)) continue;
        const std::vector<uint8_t> send = Encode(dtype, data[o].inputs[rank]);
        const std::vector<uint8_t> expected = Encode(dtype, data[o].reduced);
        std::vector<uint8_t> recv(send.size(), 0xee);
        chorus_all_reduce_args args{};
        args.struct_size = sizeof(args);
        args.send = send.data();
        args.recv = recv.data();
        args.count = count;
        args.dtype = dtype;
        args.op = op;
        chorus_request* request = reinterpret_cast<chorus_request*>(1);
        ASSERT_EQ(Collective().all_reduce(comm.get(), &args, &request), CHORUS_OK) << LastError();
        EXPECT_EQ(request, nullptr);
        ExpectEqualBuffers(dtype, expected, recv,
                           "all_reduce out of place, rank " + std::to_string(rank));
        if (op == CHORUS_REDUCE_SUM || op == CHORUS_REDUCE_MAX) {
          std::vector<uint8_t> in_place = send;
          args.send = in_place.data();
          args.recv = in_place.data();
          ASSERT_EQ(Collective().all_reduce(comm.get(), &args, &request), CHORUS_OK) << LastError();
          ExpectEqualBuffers(dtype, expected, in_place, "all_reduce in place");
        }
      }
    }
  });
}

TEST_P(RingCollectives, BroadcastFromEveryRoot) {
  const int size = GetParam().size;
  const size_t count = GetParam().count;
  const Data values = MakeData(size, count, CHORUS_REDUCE_SUM);
  RunRing(size, kTimeoutMs, kSmallSegments, [&](int rank, RankCommunicator& comm) {
    for (chorus_dtype dtype : chorus::AllDtypes()) {
      for (int root = 0; root < size; ++root) {
        const std::vector<uint8_t> expected = Encode(dtype, values.inputs[root]);
        std::vector<uint8_t> data =
            rank == root ? expected : std::vector<uint8_t>(expected.size(), 0xee);
        chorus_collective_broadcast_args args{};
        args.struct_size = sizeof(args);
        args.data = data.data();
        args.count = count;
        args.dtype = dtype;
        args.root = root;
        chorus_request* request = nullptr;
        ASSERT_EQ(Collective().broadcast(comm.get(), &args, &request), CHORUS_OK) << LastError();
        ExpectEqualBuffers(
            dtype, expected, data,
            "broadcast from " + std::to_string(root) + " at " + std::to_string(rank));
      }
    }
  });
}

TEST_P(RingCollectives, AllGatherOutOfPlaceAndInPlace) {
  const int size = GetParam().size;
  const size_t count = GetParam().count;
  const Data values = MakeData(size, count, CHORUS_REDUCE_SUM);
  std::vector<double> all;
  for (const auto& block : values.inputs) all.insert(all.end(), block.begin(), block.end());
  RunRing(size, kTimeoutMs, kSmallSegments, [&](int rank, RankCommunicator& comm) {
    for (chorus_dtype dtype : chorus::AllDtypes()) {
      const std::vector<uint8_t> expected = Encode(dtype, all);
      const std::vector<uint8_t> send = Encode(dtype, values.inputs[rank]);
      std::vector<uint8_t> recv(expected.size(), 0xee);
      chorus_collective_all_gather_args args{};
      args.struct_size = sizeof(args);
      args.send = send.data();
      args.recv = recv.data();
      args.count = count;
      args.dtype = dtype;
      chorus_request* request = nullptr;
      ASSERT_EQ(Collective().all_gather(comm.get(), &args, &request), CHORUS_OK) << LastError();
      ExpectEqualBuffers(dtype, expected, recv, "all_gather out of place");

      // In place: this rank's block already sits at its place in recv.
      std::vector<uint8_t> data(expected.size(), 0xee);
      if (!send.empty()) std::memcpy(data.data() + rank * send.size(), send.data(), send.size());
      args.send = data.data() + rank * send.size();
      args.recv = data.data();
      ASSERT_EQ(Collective().all_gather(comm.get(), &args, &request), CHORUS_OK) << LastError();
      ExpectEqualBuffers(dtype, expected, data, "all_gather in place");
    }
  });
}

TEST_P(RingCollectives, ReduceScatterEveryDtypeAndOp) {
  const int size = GetParam().size;
  const size_t count = GetParam().count;
  std::vector<Data> data;
  for (chorus_reduce_op op : kReduceOps) data.push_back(MakeData(size, count * size, op));
  RunRing(size, kTimeoutMs, kSmallSegments, [&](int rank, RankCommunicator& comm) {
    for (chorus_dtype dtype : chorus::AllDtypes()) {
      for (size_t o = 0; o < std::size(kReduceOps); ++o) {
        const chorus_reduce_op op = kReduceOps[o];
        if (!Sweeps(count, dtype, op)) continue;
        const std::vector<uint8_t> send = Encode(dtype, data[o].inputs[rank]);
        const std::vector<uint8_t> expected =
            Encode(dtype, Slice(data[o].reduced, static_cast<size_t>(rank) * count, count));
        std::vector<uint8_t> recv(expected.size(), 0xee);
        chorus_reduce_scatter_args args{};
        args.struct_size = sizeof(args);
        args.send = send.data();
        args.recv = recv.data();
        args.recv_count = count;
        args.dtype = dtype;
        args.op = op;
        chorus_request* request = nullptr;
        ASSERT_EQ(Collective().reduce_scatter(comm.get(), &args, &request), CHORUS_OK)
            << LastError();
        ExpectEqualBuffers(dtype, expected, recv, "reduce_scatter, rank " + std::to_string(rank));
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndCounts, RingCollectives,
                         testing::Values(RingCase{1, 0}, RingCase{1, 1}, RingCase{1, 1001},
                                         RingCase{1, 262147}, RingCase{2, 0}, RingCase{2, 1},
                                         RingCase{2, 1001}, RingCase{2, 262147}, RingCase{3, 0},
                                         RingCase{3, 1}, RingCase{3, 1001}, RingCase{3, 262147},
                                         RingCase{4, 0}, RingCase{4, 1}, RingCase{4, 1001},
                                         RingCase{4, 262147}),
                         CaseName);

class RingBarrier : public testing::TestWithParam<int> {};

// No rank leaves barrier n before every rank entered it.
TEST_P(RingBarrier, NoRankLeavesBeforeEveryRankArrived) {
  const int size = GetParam();
  std::atomic<int> arrived{0};
  RunRing(size, kTimeoutMs, {}, [&](int, RankCommunicator& comm) {
    for (int round = 1; round <= 5; ++round) {
      arrived.fetch_add(1);
      chorus_request* request = nullptr;
      ASSERT_EQ(Collective().barrier(comm.get(), &request), CHORUS_OK) << LastError();
      EXPECT_GE(arrived.load(), round * size) << "round " << round;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingBarrier, testing::Values(1, 2, 3, 4));

// Many tiny segments of odd sizes (segment_bytes not a multiple of the element size), and a
// sequence of different operations on one communicator.
TEST(RingSegments, TinySegmentsAndMixedOperations) {
  const int size = 3;
  const size_t count = 1001;
  const Data values = MakeData(size, count, CHORUS_REDUCE_SUM);
  for (const char* segment_bytes : {"6", "100"}) {
    RunRing(size, kTimeoutMs, {{"segment_bytes", segment_bytes}},
            [&](int rank, RankCommunicator& comm) {
              for (chorus_dtype dtype : {CHORUS_F32, CHORUS_I64, CHORUS_BF16}) {
                const std::vector<uint8_t> send = Encode(dtype, values.inputs[rank]);
                std::vector<uint8_t> recv(send.size());
                chorus_all_reduce_args reduce{};
                reduce.struct_size = sizeof(reduce);
                reduce.send = send.data();
                reduce.recv = recv.data();
                reduce.count = count;
                reduce.dtype = dtype;
                reduce.op = CHORUS_REDUCE_SUM;
                chorus_request* request = nullptr;
                ASSERT_EQ(Collective().all_reduce(comm.get(), &reduce, &request), CHORUS_OK)
                    << LastError();
                ExpectEqualBuffers(dtype, Encode(dtype, values.reduced), recv,
                                   std::string("segment_bytes=") + segment_bytes);
                ASSERT_EQ(Collective().barrier(comm.get(), &request), CHORUS_OK) << LastError();
                std::vector<uint8_t> data = rank == 2 ? send : std::vector<uint8_t>(send.size(), 0);
                chorus_collective_broadcast_args broadcast{};
                broadcast.struct_size = sizeof(broadcast);
                broadcast.data = data.data();
                broadcast.count = count;
                broadcast.dtype = dtype;
                broadcast.root = 2;
                ASSERT_EQ(Collective().broadcast(comm.get(), &broadcast, &request), CHORUS_OK)
                    << LastError();
                ExpectEqualBuffers(dtype, Encode(dtype, values.inputs[2]), data, "broadcast");
              }
            });
  }
}

// The default segment size (1 MiB) with blocks of several segments.
TEST(RingSegments, DefaultSegmentSizeOnSeveralMiB) {
  const int size = 2;
  const size_t count = (size_t{3} << 20) + 5;  // 12 MiB of f32
  const Data values = MakeData(size, count, CHORUS_REDUCE_MAX);
  RunRing(size, kTimeoutMs, {}, [&](int rank, RankCommunicator& comm) {
    const std::vector<uint8_t> send = Encode(CHORUS_F32, values.inputs[rank]);
    std::vector<uint8_t> recv(send.size());
    chorus_all_reduce_args args{};
    args.struct_size = sizeof(args);
    args.send = send.data();
    args.recv = recv.data();
    args.count = count;
    args.dtype = CHORUS_F32;
    args.op = CHORUS_REDUCE_MAX;
    chorus_request* request = nullptr;
    ASSERT_EQ(Collective().all_reduce(comm.get(), &args, &request), CHORUS_OK) << LastError();
    ExpectEqualBuffers(CHORUS_F32, Encode(CHORUS_F32, values.reduced), recv, "all_reduce");
  });
}

}  // namespace
}  // namespace chorus::ring_grpc::test
