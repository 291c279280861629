// Every collective of the gloo plugin, over 1 to 4 ranks (threads) and counts {0, 1, 1001,
// 262147}, for every dtype and reduce op (typed_values.h: DtypeOpPairs), against exact expected
// values.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <tuple>

#include "gloo_plugin.h"
#include "typed_values.h"

namespace chorus::gloo_test {
namespace {

class GlooCollectives : public testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  int size() const { return std::get<0>(GetParam()); }
  size_t count() const { return std::get<1>(GetParam()); }

  // Failures found on rank threads, reported as non-fatal test failures.
  void Record(int rank, const std::string& what, const std::string& problem) {
    if (problem.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    ADD_FAILURE() << "rank " << rank << " " << what << ": " << problem;
  }
  // True when the call succeeded and returned no request.
  bool Succeeded(int rank, const std::string& what, chorus_status status,
                 const chorus_request* request) {
    if (status != CHORUS_OK) {
      Record(rank, what, std::string(StatusName(status)) + ": " + LastError());
      return false;
    }
    if (request != nullptr) Record(rank, what, "returned a request");
    return true;
  }

  // all_reduce with `algorithm`; in place for SUM and MIN, out of place for PROD and MAX.
  void CheckAllReduce(const std::string& algorithm) {
    const auto group = Group(size(), {{"algorithm", algorithm}});
    ASSERT_EQ(group->CreateError(), "");
    for (const auto& pair : DtypeOpPairs(count())) {
      const chorus_dtype dtype = pair.first;
      const chorus_reduce_op op = pair.second;
      const std::string what =
          std::string("all_reduce ") + chorus::DtypeName(dtype) + " " + chorus::ReduceOpName(op);
      const bool in_place = op == CHORUS_REDUCE_SUM || op == CHORUS_REDUCE_MIN;
      const std::vector<double> expected =
          Values(count(), [&](size_t i) { return Reduced(dtype, op, size(), i); });
      OnRanks(size(), [&](int rank) {
        TypedBuffer send(dtype, count()), separate(dtype, count());
        send.Set(0, Values(count(), [&](size_t i) { return InputValue(dtype, op, rank, i); }));
        TypedBuffer& recv = in_place ? send : separate;
        const chorus_all_reduce_args args{sizeof(args), send.data(), recv.data(), count(),
                                          dtype,        op,          nullptr};
        chorus_request* request = nullptr;
        if (Succeeded(rank, what, Gloo().all_reduce(group->comm(rank), &args, &request), request)) {
          Record(rank, what, Mismatches(recv, 0, expected));
        }
      });
    }
  }

  std::mutex mutex_;
};

TEST_P(GlooCollectives, AllReduceRing) { CheckAllReduce("ring"); }
TEST_P(GlooCollectives, AllReduceRingChunked) { CheckAllReduce("ring_chunked"); }
TEST_P(GlooCollectives, AllReduceBcube) { CheckAllReduce("bcube"); }

TEST_P(GlooCollectives, BroadcastFromEveryRoot) {
  const auto group = Group(size());
  ASSERT_EQ(group->CreateError(), "");
  for (int root = 0; root < size(); ++root) {
    const std::vector<double> sent = Values(count(), [&](size_t i) { return MovedValue(root, i); });
    for (chorus_dtype dtype : kAllDtypes) {
      const std::string what =
          std::string("broadcast ") + chorus::DtypeName(dtype) + " from " + std::to_string(root);
      OnRanks(size(), [&](int rank) {
        TypedBuffer data(dtype, count());  // others hold 0x5a bytes, overwritten
        if (rank == root) data.Set(0, sent);
        const chorus_collective_broadcast_args args{sizeof(args), data.data(), count(),
                                                    dtype,        root,        nullptr};
        chorus_request* request = nullptr;
        if (Succeeded(rank, what, Gloo().broadcast(group->comm(rank), &args, &request), request)) {
          Record(rank, what, Mismatches(data, 0, sent));
        }
      });
    }
  }
}

TEST_P(GlooCollectives, AllGather) {
  const auto group = Group(size());
  ASSERT_EQ(group->CreateError(), "");
  std::vector<std::vector<double>> blocks;
  for (int rank = 0; rank < size(); ++rank) {
    blocks.push_back(Values(count(), [&](size_t i) { return MovedValue(rank, i); }));
  }
  for (chorus_dtype dtype : kAllDtypes) {
    // In place (send is this rank's block of recv) for the 16-bit dtypes.
    const bool in_place = dtype == CHORUS_F16 || dtype == CHORUS_BF16;
    const std::string what =
        std::string("all_gather ") + chorus::DtypeName(dtype) + (in_place ? " in place" : "");
    OnRanks(size(), [&](int rank) {
      TypedBuffer send(dtype, count()), recv(dtype, count() * static_cast<size_t>(size()));
      const size_t own = static_cast<size_t>(rank) * count();
      (in_place ? recv : send).Set(in_place ? own : 0, blocks[rank]);
      const void* source =
          in_place ? static_cast<unsigned char*>(recv.data()) + own * chorus_dtype_size(dtype)
                   : send.data();
      const chorus_collective_all_gather_args args{sizeof(args), source, recv.data(),
                                                   count(),      dtype,  nullptr};
      chorus_request* request = nullptr;
      if (Succeeded(rank, what, Gloo().all_gather(group->comm(rank), &args, &request), request)) {
        for (int from = 0; from < size(); ++from) {
          Record(rank, what + ", block " + std::to_string(from),
                 Mismatches(recv, static_cast<size_t>(from) * count(), blocks[from]));
        }
      }
    });
  }
}

// Through the default algorithm, ring (reduce_scatter is an all-reduce here).
TEST_P(GlooCollectives, ReduceScatter) {
  const auto group = Group(size());
  ASSERT_EQ(group->CreateError(), "");
  const size_t total = count() * static_cast<size_t>(size());
  for (const auto& pair : DtypeOpPairs(count())) {
    const chorus_dtype dtype = pair.first;
    const chorus_reduce_op op = pair.second;
    const std::string what =
        std::string("reduce_scatter ") + chorus::DtypeName(dtype) + " " + chorus::ReduceOpName(op);
    OnRanks(size(), [&](int rank) {
      TypedBuffer send(dtype, total), recv(dtype, count());
      send.Set(0, Values(total, [&](size_t i) { return InputValue(dtype, op, rank, i); }));
      const chorus_reduce_scatter_args args{sizeof(args), send.data(), recv.data(), count(),
                                            dtype,        op,          nullptr};
      chorus_request* request = nullptr;
      if (Succeeded(rank, what, Gloo().reduce_scatter(group->comm(rank), &args, &request),
                    request)) {
        const size_t first = static_cast<size_t>(rank) * count();
        Record(rank, what, Mismatches(recv, 0, Values(count(), [&](size_t i) {
                                        return Reduced(dtype, op, size(), first + i);
                                      })));
      }
    });
  }
}

// No rank leaves a barrier before every rank has entered it.
TEST_P(GlooCollectives, Barrier) {
  const auto group = Group(size());
  ASSERT_EQ(group->CreateError(), "");
  std::atomic<int> entered{0};
  OnRanks(size(), [&](int rank) {
    for (int round = 1; round <= 3; ++round) {
      entered.fetch_add(1);
      chorus_request* request = nullptr;
      if (!Succeeded(rank, "barrier", Gloo().barrier(group->comm(rank), &request), request)) return;
      if (entered.load() < round * size()) {
        Record(rank, "barrier", "left round " + std::to_string(round) + " before every rank came");
      }
      // A second barrier, so that no rank enters the next round before all checked this one.
      if (!Succeeded(rank, "barrier", Gloo().barrier(group->comm(rank), &request), request)) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndCounts, GlooCollectives,
                         testing::Combine(testing::Values(1, 2, 3, 4),
                                          testing::Values(size_t{0}, size_t{1}, size_t{1001},
                                                          size_t{262147})),
                         [](const testing::TestParamInfo<std::tuple<int, size_t>>& info) {
                           return "ranks" + std::to_string(std::get<0>(info.param)) + "_count" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace chorus::gloo_test
