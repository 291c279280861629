// The plugin's algorithms as the core runs them: collectives ALGORITHM@TRANSPORT over the core's
// tcp transport, ranks as threads over an in-process store, through chorus::Communicator as
// MultiWorkerMirroredStrategy uses it. Exact integer sums for rank counts that fold (3, 5, 6) and
// that do not (1, 2, 4); float results bit-identical on every rank; the torus on explicit grids
// (options reach run()); a bad grid refused on every rank; a segmented binomial broadcast from
// every root. The kit (tools/chorus-conformance/tests) checks every dtype, op and size on top of
// this.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using ::testing::HasSubstr;

const Registry& AlgorithmsRegistry() {
  static const Registry registry([] {
    LoaderOptions options;
    options.search_dirs = {ALGORITHMS_PLUGIN_DIR};
    options.filter = "algorithms";
    return options;
  }());
  return registry;
}

// Runs body(rank, communicator) on `ranks` threads; returns each rank's error ("" when none).
std::vector<std::string> OnRanks(int ranks, const std::string& collective, const Options& options,
                                 const std::function<void(int, Communicator&)>& body) {
  auto store = MakeInProcessStore();
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        CommunicatorConfig config;
        config.rank = rank;
        config.size = ranks;
        config.store = store;
        config.timeout_seconds = 60;
        config.options = options;
        JobShape shape;
        shape.ranks = ranks;
        auto comm = Communicator::Create(
            AlgorithmsRegistry(), PlanNamed(AlgorithmsRegistry(), collective, shape), config);
        body(rank, *comm);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void ExpectNoErrors(const std::vector<std::string>& errors, const std::string& what) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << what << ", rank " << r;
}

// Sum over ranks of (rank + 1) * (i % 97 + 1), exact in i32; and f32 results equal on every rank.
void CheckAllReduce(const std::string& collective, int ranks, size_t count,
                    const Options& options = {}) {
  const std::string what =
      collective + " with " + std::to_string(ranks) + " ranks, count " + std::to_string(count);
  std::vector<std::vector<int32_t>> sums(ranks);
  std::vector<std::vector<float>> floats(ranks);
  ExpectNoErrors(OnRanks(ranks, collective, options,
                         [&](int rank, Communicator& comm) {
                           std::vector<int32_t> data(count);
                           for (size_t i = 0; i < count; ++i) {
                             data[i] = (rank + 1) * static_cast<int32_t>(i % 97 + 1);
                           }
                           std::vector<int32_t> out(count, -1);
                           comm.AllReduce(data.data(), out.data(), count, CHORUS_I32,
                                          CHORUS_REDUCE_SUM);
                           sums[rank] = out;
                           std::vector<float> f(count);
                           for (size_t i = 0; i < count; ++i) f[i] = 0.1f * (rank + 1) + 1e-3f * i;
                           comm.AllReduce(f.data(), f.data(), count, CHORUS_F32, CHORUS_REDUCE_SUM);
                           floats[rank] = f;
                         }),
                 what);
  const int32_t factor = ranks * (ranks + 1) / 2;
  for (int rank = 0; rank < ranks; ++rank) {
    ASSERT_EQ(sums[rank].size(), count) << what;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(sums[rank][i], factor * static_cast<int32_t>(i % 97 + 1))
          << what << ", rank " << rank << ", element " << i;
    }
    ASSERT_EQ(floats[rank].size(), count);
    // Bit for bit (memcmp), where there are bits: an empty vector's data() may be null.
    EXPECT_TRUE(count == 0 ||
                std::memcmp(floats[rank].data(), floats[0].data(), count * sizeof(float)) == 0)
        << what << ": rank " << rank << "'s floats differ from rank 0's";
  }
}

TEST(AlgorithmPairs, EveryAllReduceSumsExactlyForFoldingAndPowerOfTwoRankCounts) {
  for (const char* collective : {"rhd@tcp", "recursive_doubling@tcp", "torus@tcp"}) {
    for (int ranks : {1, 2, 3, 4, 5, 6}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{1001}, size_t{70001}}) {
        CheckAllReduce(collective, ranks, count);
      }
    }
  }
}

TEST(AlgorithmPairs, TheTorusRunsOnTheGridItIsGiven) {
  for (const char* grid : {"2x3", "3x2", "1x6", "6x1"}) {
    CheckAllReduce("torus@tcp", 6, 10007, {{"grid", grid}});
  }
}

TEST(AlgorithmPairs, ABadGridIsRefusedOnEveryRank) {
  const auto errors = OnRanks(6, "torus@tcp", {{"grid", "4x4"}}, [](int, Communicator& comm) {
    std::vector<float> data(100, 1.0f);
    comm.AllReduce(data.data(), data.data(), data.size(), CHORUS_F32, CHORUS_REDUCE_SUM);
  });
  for (const auto& error : errors) {
    EXPECT_THAT(error, HasSubstr("torus: grid=4x4 has 16 ranks but the job has 6"));
  }
}

TEST(AlgorithmPairs, ASegmentedBinomialBroadcastReachesEveryRankFromEveryRoot) {
  constexpr int kRanks = 5;
  constexpr size_t kCount = 10007;
  for (int root = 0; root < kRanks; ++root) {
    std::vector<std::vector<int32_t>> got(kRanks);
    ExpectNoErrors(OnRanks(kRanks, "binomial@tcp", {{"segment_bytes", "1000"}},
                           [&](int rank, Communicator& comm) {
                             std::vector<int32_t> data(kCount, -1);
                             if (rank == root) {
                               for (size_t i = 0; i < kCount; ++i) {
                                 data[i] = static_cast<int32_t>(i * 3 + root);
                               }
                             }
                             comm.Broadcast(data.data(), kCount, CHORUS_I32, root);
                             got[rank] = data;
                           }),
                   "binomial from root " + std::to_string(root));
    for (int rank = 0; rank < kRanks; ++rank) {
      ASSERT_EQ(got[rank].size(), kCount);
      for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(got[rank][i], static_cast<int32_t>(i * 3 + root))
            << "root " << root << ", rank " << rank << ", element " << i;
      }
    }
  }
}

// What the algorithms leave to the core's ring (a pair serves every operation), and the
// dissemination barrier.
TEST(AlgorithmPairs, OperationsAnAlgorithmLacksRunOnTheRing) {
  ExpectNoErrors(OnRanks(3, "rhd@tcp", {},
                         [](int rank, Communicator& comm) {
                           std::vector<int32_t> mine(4, rank), all(12, -1);
                           comm.AllGather(mine.data(), all.data(), 4, CHORUS_I32);
                           for (int r = 0; r < 3; ++r) {
                             for (int i = 0; i < 4; ++i) {
                               if (all[r * 4 + i] != r) throw std::runtime_error("all_gather");
                             }
                           }
                           comm.Barrier();
                         }),
                 "rhd@tcp all_gather and barrier");
  ExpectNoErrors(OnRanks(5, "recursive_doubling@tcp", {},
                         [](int, Communicator& comm) {
                           for (int i = 0; i < 3; ++i) comm.Barrier();
                         }),
                 "recursive_doubling@tcp barrier");
}

}  // namespace
}  // namespace chorus
