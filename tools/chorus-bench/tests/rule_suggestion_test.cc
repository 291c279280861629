// --suggest-rules: the fastest backend per size becomes CHORUS_ALGORITHM rules that the core's
// own parser accepts, neighbours with one winner merge, wrong results never win.
#include "rule_suggestion.h"

#include <chorus/collective/algorithm_rules.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus::bench {
namespace {

Measurement TimedRow(const std::string& backend, uint64_t bytes, double time_us,
                     bool in_place = false, CollectiveKind op = CollectiveKind::kAllReduce,
                     uint64_t wrong = 0) {
  Measurement m;
  m.backend = backend;
  m.op = op;
  m.bytes = bytes;
  m.in_place = in_place;
  m.time_us = time_us;
  m.wrong = wrong;
  return m;
}

TEST(SuggestRules, FastestPerSizeWithMergedNeighbours) {
  const std::vector<Measurement> rows = {
      TimedRow("shm", 4096, 1.0),        TimedRow("gloo", 4096, 400.0),
      TimedRow("shm", 65536, 5.0),       TimedRow("gloo", 65536, 90.0),
      TimedRow("shm", 1 << 20, 300.0),   TimedRow("gloo", 1 << 20, 200.0),
      TimedRow("shm", 16 << 20, 5000.0), TimedRow("gloo", 16 << 20, 4000.0),
  };
  const std::string rules = SuggestAlgorithmRules(rows);
  EXPECT_EQ(rules, "allreduce:0-1M=shm,1M-inf=gloo");
  const auto parsed = ParseAlgorithmRules(rules);
  EXPECT_EQ(RouteFor(parsed, CHORUS_OP_ALL_REDUCE, 100), "shm");
  EXPECT_EQ(RouteFor(parsed, CHORUS_OP_ALL_REDUCE, uint64_t{1} << 40), "gloo");
}

TEST(SuggestRules, OutOfPlaceDecidesAndWrongResultsNeverWin) {
  const std::vector<Measurement> rows = {
      TimedRow("a", 4096, 1.0, /*in_place=*/true),  // fastest, but in place
      TimedRow("b", 4096, 9.0),
      TimedRow("c", 4096, 2.0, false, CollectiveKind::kAllReduce, /*wrong=*/5),
  };
  EXPECT_EQ(SuggestAlgorithmRules(rows), "allreduce:0-inf=b");
}

TEST(SuggestRules, EveryRoutableOperationAndNotBatchReduce) {
  const std::vector<Measurement> rows = {
      TimedRow("x", 1024, 1.0, true, CollectiveKind::kBroadcast),
      TimedRow("y", 1024, 1.0, false, CollectiveKind::kAllGather),
      TimedRow("z", 1024, 1.0, false, CollectiveKind::kReduceScatter),
      TimedRow("w", 1024, 1.0, false, CollectiveKind::kBatchReduce),
  };
  const std::string rules = SuggestAlgorithmRules(rows);
  EXPECT_EQ(rules, "allgather:0-inf=y;broadcast:0-inf=x;reducescatter:0-inf=z");
  EXPECT_EQ(ParseAlgorithmRules(rules).size(), 3u);
  EXPECT_EQ(SuggestAlgorithmRules({}), "");
}

}  // namespace
}  // namespace chorus::bench
