// chorus-bench -n N end to end, with real worker processes on 127.0.0.1: the test plugin
// bench_wrong computes wrong results and must show #wrong > 0, core_ring (and gloo, ring_grpc
// when built) must show 0; every operation, sizes 0, 1, odd and large, 2 and 3 workers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <tuple>

#include "bench_process.h"

namespace chorus::bench::testing {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// workers, operation
class WrongDetection : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(WrongDetection, WrongBackendHasWrongElementsAndCoreRingNone) {
  const auto [workers, op] = GetParam();
  const std::string csv = TempPath("wrong.csv"), svg = TempPath("wrong.svg");
  // 0, 1, 7, ..., 823543 bytes (odd element counts; the last 200K+ f32).
  const BenchResult r =
      RunBench("-n " + std::to_string(workers) + " --backends core_ring,bench_wrong --ops " + op +
               " -b 0 -e 1M -f 7 -w 1 -i 2 --timeout 60 --csv " + csv + " --plot " + svg);
  EXPECT_EQ(r.exit_code, 1) << "wrong results must fail the run\n" << r.out << r.err;
  EXPECT_NE(r.err.find("wrong elements in total"), std::string::npos) << r.err;
  const auto rows = ReadCsv(csv);
  const size_t placements = op == "broadcast" ? 1 : 2;
  ASSERT_EQ(rows.size(), 2 * 9 * placements) << r.out;
  size_t wrong_rows = 0;
  for (const auto& row : rows) {
    EXPECT_EQ(row.op, op);
    if (row.backend == "core_ring") {
      EXPECT_EQ(row.wrong, 0u) << row.bytes << (row.in_place ? " in place" : "");
    } else {
      ASSERT_EQ(row.backend, "bench_wrong");
      // Every row with elements is caught (broadcast: every non-root element).
      if (row.bytes >= 4 * static_cast<uint64_t>(workers)) {
        EXPECT_GT(row.wrong, 0u) << row.bytes << (row.in_place ? " in place" : "");
        ++wrong_rows;
      }
    }
  }
  EXPECT_GE(wrong_rows, 6 * placements);
  // Only worker 0 prints the table: one line per backend and size.
  EXPECT_EQ(Count(r.out, "\n  core_ring "), 9u) << r.out;
  EXPECT_EQ(Count(r.out, "\n  bench_wrong "), 9u) << r.out;
  EXPECT_NE(r.out.find(std::to_string(workers) + " workers (TFConfigClusterResolver)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Count(ReadFile(svg), "<polyline"), 2u);
  std::remove(csv.c_str());
  std::remove(svg.c_str());
}

INSTANTIATE_TEST_SUITE_P(Ops, WrongDetection,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values("all_reduce", "all_gather",
                                                              "broadcast", "reduce_scatter")),
                         [](const auto& info) {
                           return std::get<1>(info.param) + "_" +
                                  std::to_string(std::get<0>(info.param));
                         });

#if defined(CHORUS_HAVE_GLOO) && defined(CHORUS_HAVE_RING_GRPC)
// The plugins as a benchmark sees them: every operation right, sizes from 0 to odd and large,
// alternating backends with repeats.
TEST(Plugins, EveryOperationRightOnEveryBackend) {
  const std::string csv = TempPath("plugins.csv");
  const BenchResult r = RunBench(
      "-n 2 --backends core_ring,gloo,ring_grpc --ops all_reduce,all_gather,broadcast,"
      "reduce_scatter -b 0 -e 300K -f 49 -w 1 -i 2 -R 2 -d bf16 -o max --timeout 60 --csv " +
      csv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = ReadCsv(csv);
  // Sizes 0, 1, 49, 2401, 117649: per backend 3 ops x 2 placements + broadcast in place.
  EXPECT_EQ(rows.size(), 3u * 5 * 7);
  std::set<std::string> backends;
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0u) << row.backend << " " << row.op << " " << row.bytes;
    EXPECT_EQ(row.dtype, "bf16");
    backends.insert(row.backend);
  }
  EXPECT_EQ(backends, (std::set<std::string>{"core_ring", "gloo", "ring_grpc"}));
  std::remove(csv.c_str());
}
#endif

// --hosts 2: four workers play two hosts of two; the hierarchical core_ring+core_ring (the
// hierarchical plugin composing the core's ring twice) is right at every size, --suggest-rules
// prints rules the core parses, and --tuning-file writes them for jobs of this shape.
TEST(Workers, TwoHostsOfTwoWithAHierarchicalBackendAndSuggestedRules) {
  const std::string csv = TempPath("hosts.csv"), tuning = TempPath("tuning.txt");
  const BenchResult r = RunBench(
      "-n 4 --hosts 2 --backends core_ring+core_ring,core_ring -b 1 -e 200K -f 23 -w 1 "
      "-i 2 --tuning-file " +
      tuning + " --timeout 60 --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = ReadCsv(csv);
  EXPECT_EQ(rows.size(), 2u * 4 * 2);  // sizes 1, 23, 529, 12167 bytes... up to 200K: 4 sizes
  for (const auto& row : rows) EXPECT_EQ(row.wrong, 0u) << row.backend << " " << row.bytes;
  const auto at = r.out.find("CHORUS_ALGORITHM='allreduce:0-");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-inf=", at), std::string::npos) << r.out;
  const std::string rules = r.out.substr(at + 18, r.out.find('\'', at + 18) - (at + 18));
  const std::string file = ReadFile(tuning);
  EXPECT_NE(file.find("[workers=4 hosts=2]\n" + rules + "\n"), std::string::npos) << file;
  EXPECT_NE(r.out.find("# wrote " + tuning), std::string::npos) << r.out;
  std::remove(csv.c_str());
  std::remove(tuning.c_str());
}

// --auto: the backend `auto` beside every collective that serves the job, every row right, and
// AUTO's regret per size on stdout and beside the CSV.
TEST(Auto, AutoBesideEveryCandidateWithItsRegretPerSize) {
  const std::string csv = TempPath("auto.csv");
  const BenchResult r =
      RunBench("-n 2 --auto -b 4K -e 64K -f 16 -w 1 -i 2 --timeout 60 --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = ReadCsv(csv);
  std::set<std::string> backends;
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0u) << row.backend << " " << row.bytes;
    backends.insert(row.backend);
  }
  EXPECT_TRUE(backends.count("auto")) << r.out;
  EXPECT_TRUE(backends.count("core_ring")) << r.out;  // the core's reference always serves
  EXPECT_GE(backends.size(), 3u) << r.out;
  EXPECT_EQ(backends.count("bench_wrong"), 0u) << "a collective AUTO cannot choose is no candidate";
  EXPECT_NE(r.out.find("# auto: AUTO: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# worst regret of all_reduce: "), std::string::npos) << r.out;
  const std::string regret_path = csv.substr(0, csv.size() - 4) + ".regret.csv";
  const std::string regret = ReadFile(regret_path);
  EXPECT_EQ(regret.rfind("op,bytes,auto_runs_on,auto_us,fastest,fastest_us,regret\n", 0), 0u)
      << regret;
  EXPECT_EQ(Count(regret, "\nall_reduce,"), 2u) << regret;  // 4K and 64K
  std::remove(csv.c_str());
  std::remove(regret_path.c_str());
}

// CHORUS_AUTOTUNE=1 under `auto`: the workers time the candidates, agree on a winner, print it,
// and worker 0 keeps it in CHORUS_TUNING_CACHE; the next run starts from it.
TEST(Auto, AutotuningDecidesKeepsTheDecisionAndStartsFromIt) {
  const std::string cache = TempPath("tuning.cache");
  setenv("CHORUS_AUTOTUNE", "1", 1);
  setenv("CHORUS_AUTOTUNE_SAMPLES", "2", 1);
  setenv("CHORUS_TUNING_CACHE", cache.c_str(), 1);
  const BenchResult first =
      RunBench("-n 2 --backends auto,core_ring -b 4K -e 4K -w 1 -i 2 --timeout 60");
  setenv("CHORUS_LOG_LEVEL", "info", 1);
  const BenchResult second =
      RunBench("-n 2 --backends auto,core_ring -b 4K -e 4K -w 1 -i 2 --timeout 60");
  for (const char* name :
       {"CHORUS_AUTOTUNE", "CHORUS_AUTOTUNE_SAMPLES", "CHORUS_TUNING_CACHE", "CHORUS_LOG_LEVEL"}) {
    unsetenv(name);
  }
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  const auto at = first.out.find("# autotuned all_reduce 4K-16K: ");
  ASSERT_NE(at, std::string::npos) << first.out;
  const std::string line = first.out.substr(at, first.out.find('\n', at) - at);
  const std::string winner = line.substr(line.rfind("-> ") + 3);
  const std::string file = ReadFile(cache);
  EXPECT_NE(file.find("[workers=2 hosts=1]\nallreduce:4K-16K=" + winner + "\n"), std::string::npos)
      << file;
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.err.find("CHORUS_TUNING_CACHE=" + cache +
                            " decides 1 size band(s): "
                            "allreduce:4K-16K=" +
                            winner),
            std::string::npos)
      << second.err;
  std::remove(cache.c_str());
}

TEST(Workers, CommunicationVariableNamesTheDefaultBackend) {
  const std::string csv = TempPath("variable.csv");
  setenv("CHORUS_COMMUNICATION", "AUTO", 1);
  const BenchResult r = RunBench("-n 2 -b 4K -e 4K -w 0 -i 1 --timeout 60 --csv " + csv);
  unsetenv("CHORUS_COMMUNICATION");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = ReadCsv(csv);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].backend, "auto");
  std::remove(csv.c_str());
}

TEST(Workers, SingleWorkerWithoutAJobRunsAlone) {
  const std::string csv = TempPath("alone.csv");
  const BenchResult r = RunBench("--backends core_ring -b 1K -e 4K -f 2 -w 0 -i 1 --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 workers (single process)"), std::string::npos) << r.out;
  const auto rows = ReadCsv(csv);
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0u);
    EXPECT_EQ(row.busbw, 0.0);  // one rank: nothing crosses a bus
  }
  std::remove(csv.c_str());
}

}  // namespace
}  // namespace chorus::bench::testing
