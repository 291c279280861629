// The hierarchical collective ("local+cross", or AUTO's choice on hosts of several ranks), loaded
// from this plugin by the core and composing other collectives through the host: ranks as threads
// over an in-process store, each told its host through the "host" option, so one machine plays
// several hosts. Every operation against a reference, over layouts (hosts x ranks per host, ranks
// numbered host by host or not) and sizes 0, 1, odd, and large enough to take the reduce-scatter
// path; the choice AUTO makes; and the errors of a bad layout or name.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace chorus {
namespace {

using ::testing::HasSubstr;

bool HasCollective(const std::string& name) {
  for (const auto& n : Registry::Global().CollectiveNames()) {
    if (n == name) return true;
  }
  return false;
}

// shm within hosts when it is built, else the core's ring for both levels.
std::string Composite() { return HasCollective("shm") ? "shm+core_ring" : "core_ring+core_ring"; }

struct Layout {
  int hosts, per_host;
  bool host_major;  // ranks numbered host by host (else round-robin over hosts)
  int size() const { return hosts * per_host; }
  std::string HostOf(int rank) const {
    return "host" + std::to_string(host_major ? rank / per_host : rank % hosts);
  }
};

void PrintTo(const Layout& l, std::ostream* out) {
  *out << l.hosts << " hosts of " << l.per_host << (l.host_major ? "" : ", interleaved");
}

// Runs body(rank, communicator) on one thread per rank; returns each rank's error ("" = none).
std::vector<std::string> OnEveryRank(int size, const std::function<std::string(int)>& host_of,
                                     const std::string& collective,
                                     const std::function<void(int, Communicator&)>& body) {
  auto store = MakeInProcessStore();
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        CommunicatorConfig config;
        config.rank = rank;
        config.size = size;
        config.store = store;
        config.timeout_seconds = 60;
        config.options = {{"host", host_of(rank)}};
        config.per_rank_options = {"host"};
        auto comm = Communicator::Create(Registry::Global(), collective, config);
        body(rank, *comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

float Input(size_t i, int rank) {
  return static_cast<float>((i + static_cast<size_t>(rank)) % 7 + 1);
}

class HierarchicalOps : public ::testing::TestWithParam<std::tuple<Layout, size_t>> {};

TEST_P(HierarchicalOps, EveryOperationMatchesTheReference) {
  const Layout& layout = std::get<0>(GetParam());
  const size_t count = std::get<1>(GetParam());
  const int size = layout.size();
  std::vector<std::vector<std::string>> failures(static_cast<size_t>(size));
  const auto errors = OnEveryRank(
      size, [&](int r) { return layout.HostOf(r); }, Composite(),
      [&](int rank, Communicator& c) {
        auto fail = [&](const std::string& what, size_t i, double got, double want) {
          if (failures[rank].size() < 5) {
            failures[rank].push_back(what + "[" + std::to_string(i) + "] = " + std::to_string(got) +
                                     ", want " + std::to_string(want));
          }
        };
        std::vector<float> send(count), recv(count);
        for (size_t i = 0; i < count; ++i) send[i] = Input(i, rank);
        // all_reduce: sum (out of place), max (in place), mean; i32 sum.
        c.AllReduce(send.data(), recv.data(), count, CHORUS_F32, CHORUS_REDUCE_SUM);
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < size; ++r) want += Input(i, r);
          if (recv[i] != want) fail("sum", i, recv[i], want);
        }
        std::vector<float> inplace = send;
        c.AllReduce(inplace.data(), inplace.data(), count, CHORUS_F32, CHORUS_REDUCE_MAX);
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < size; ++r) want = std::max(want, Input(i, r));
          if (inplace[i] != want) fail("max", i, inplace[i], want);
        }
        std::vector<int32_t> ints(count);
        for (size_t i = 0; i < count; ++i) ints[i] = static_cast<int32_t>(Input(i, rank)) - 4;
        c.AllReduce(ints.data(), ints.data(), count, CHORUS_I32, CHORUS_REDUCE_SUM);
        for (size_t i = 0; i < count; ++i) {
          int32_t want = 0;
          for (int r = 0; r < size; ++r) want += static_cast<int32_t>(Input(i, r)) - 4;
          if (ints[i] != want) fail("i32 sum", i, ints[i], want);
        }
        // broadcast from every rank in turn.
        for (int root = 0; root < size; ++root) {
          std::vector<float> data = send;
          c.Broadcast(data.data(), count, CHORUS_F32, root);
          for (size_t i = 0; i < count; ++i) {
            if (data[i] != Input(i, root))
              fail("broadcast " + std::to_string(root), i, data[i], Input(i, root));
          }
        }
        // all_gather: rank r's block at r * count.
        std::vector<float> gathered(count * static_cast<size_t>(size));
        c.AllGather(send.data(), gathered.data(), count, CHORUS_F32);
        for (int r = 0; r < size; ++r) {
          for (size_t i = 0; i < count; ++i) {
            if (gathered[r * count + i] != Input(i, r)) {
              fail("all_gather block " + std::to_string(r), i, gathered[r * count + i],
                   Input(i, r));
            }
          }
        }
        // reduce_scatter: block b of rank r holds Input(b * count + i, r).
        std::vector<float> blocks(count * static_cast<size_t>(size)), mine(count);
        for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = Input(i, rank);
        c.ReduceScatter(blocks.data(), mine.data(), count, CHORUS_F32, CHORUS_REDUCE_SUM);
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < size; ++r) want += Input(rank * count + i, r);
          if (mine[i] != want) fail("reduce_scatter", i, mine[i], want);
        }
        c.Barrier();
      });
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    EXPECT_THAT(failures[rank], ::testing::IsEmpty()) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(
    LayoutsAndSizes, HierarchicalOps,
    ::testing::Combine(::testing::Values(Layout{1, 3, true}, Layout{3, 1, true}, Layout{2, 2, true},
                                         Layout{2, 2, false}, Layout{2, 3, false}),
                       ::testing::Values(size_t{0}, size_t{1}, size_t{1001}, size_t{20011})),
    [](const auto& info) {
      const Layout& l = std::get<0>(info.param);
      return std::to_string(l.hosts) + "_hosts_of_" + std::to_string(l.per_host) +
             (l.host_major ? "" : "_interleaved") + "_count_" +
             std::to_string(std::get<1>(info.param));
    });

TEST(Hierarchical, HostsOfDifferentSizesAreAnErrorNamingThem) {
  const auto errors = OnEveryRank(
      3, [](int r) { return r < 2 ? "big" : "small"; }, Composite(), [](int, Communicator&) {});
  for (const std::string& error : errors) {
    EXPECT_THAT(error, HasSubstr("every host must run as many ranks"));
    EXPECT_THAT(error, HasSubstr("host 'big' runs 2 (ranks 0, 1)"));
    EXPECT_THAT(error, HasSubstr("host 'small' runs 1 (rank 2)"));
  }
}

TEST(Hierarchical, AnUnknownPartListsTheAvailableCollectives) {
  const auto errors = OnEveryRank(
      1, [](int) { return "h"; }, "core_ring+no_such", [](int, Communicator&) {});
  EXPECT_THAT(errors[0], HasSubstr("'no_such', which no loaded plugin provides"));
  EXPECT_THAT(errors[0], HasSubstr("Available: core_ring"));
}

TEST(Hierarchical, AMalformedNameSaysTheForm) {
  for (const char* name : {"+gloo", "shm+", "a+b+c"}) {
    try {
      CanonicalCollectiveName(Registry::Global(), name);
      ADD_FAILURE() << name << ": expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
      EXPECT_THAT(e.what(), HasSubstr("takes the form local+cross")) << name;
    }
  }
}

// Without local and cross options each level is AUTO: the core picks the best collective for one
// host of 2 ranks and for 2 hosts of one rank, and the composition still computes the sum.
TEST(Hierarchical, WithoutLocalAndCrossOptionsEachLevelIsChosenByScores) {
  const Layout layout{2, 2, true};
  std::vector<std::vector<float>> results(4);
  const auto errors = OnEveryRank(
      4, [&](int r) { return layout.HostOf(r); }, "hierarchical",
      [&](int rank, Communicator& c) {
        results[rank].assign(1001, static_cast<float>(rank + 1));
        c.AllReduce(results[rank].data(), results[rank].data(), 1001, CHORUS_F32,
                    CHORUS_REDUCE_SUM);
      });
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    EXPECT_EQ(results[rank], std::vector<float>(1001, 10.0f)) << "rank " << rank;
  }
}

// AUTO takes the composition for hosts of several ranks when a collective is better within a
// host (shm) than across; with one host, or one rank per host, the flat collectives win.
TEST(Hierarchical, AutoComposesOnlyWhereAHostHasABetterCollective) {
  const Registry& registry = Registry::Global();
  const auto best = [&](int ranks, int hosts, int per_host) {
    JobShape shape;
    shape.ranks = ranks;
    shape.hosts = hosts;
    shape.ranks_per_host = per_host;
    return PlanByScores(registry, shape, CHORUS_REQUEST_AUTO).collectives.front();
  };
  // The best flat collective (core_ring, or a pair such as ring@ucx where a transport plugin
  // scores higher than the core's tcp).
  const auto best_flat = [&](int ranks, int hosts, int per_host) {
    JobShape shape;
    shape.ranks = ranks;
    shape.hosts = hosts;
    shape.ranks_per_host = per_host;
    return PlanByScores(registry, shape, CHORUS_REQUEST_AUTO, "hierarchical").collectives.front();
  };
  if (HasCollective("shm")) {
    EXPECT_EQ(best(4, 2, 2), "hierarchical");
    EXPECT_EQ(best(4, 1, 4), "shm");
  } else {
    EXPECT_EQ(best(4, 2, 2), best_flat(4, 2, 2));  // nothing beats the flat one within a host
  }
  EXPECT_EQ(best(3, 3, 1), best_flat(3, 3, 1));
  EXPECT_EQ(best(3, 2, 0), best_flat(3, 2, 0));  // uneven hosts: no composition
  EXPECT_NE(best_flat(3, 3, 1), "hierarchical");
}

TEST(Hierarchical, ALevelMustBeAFlatCollective) {
  const auto errors = OnEveryRank(
      1, [](int) { return "h"; }, "hierarchical", [](int, Communicator&) {});
  EXPECT_EQ(errors[0], "");
  for (const char* level : {"local", "cross"}) {
    auto store = MakeInProcessStore();
    CommunicatorConfig config;
    config.store = store;
    config.options = {{level, "core_ring+core_ring"}};
    try {
      Communicator::Create(Registry::Global(), "hierarchical", config);
      ADD_FAILURE() << level << ": expected an error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("local and cross must be flat collectives")) << level;
    }
  }
}

TEST(Hierarchical, ItsNameIsCanonical) {
  EXPECT_EQ(CanonicalCollectiveName(Registry::Global(), "core+core"), "core_ring+core_ring");
  EXPECT_EQ(CanonicalCollectiveName(Registry::Global(), "core_ring"), "core_ring");
}

}  // namespace
}  // namespace chorus
