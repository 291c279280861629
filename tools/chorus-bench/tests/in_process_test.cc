// --in-process end to end: every operation of reduction_to_one_device and hierarchical_copy
// over 1..4 virtual cpu devices, sizes 0, 1, odd and large, must come out with #wrong = 0.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "bench_process.h"

namespace chorus::bench::testing {
namespace {

#ifdef CHORUS_HAVE_HIERARCHICAL
const char* const kBackends = "reduction_to_one_device,hierarchical_copy";
constexpr size_t kBackendCount = 2;
#else
const char* const kBackends = "reduction_to_one_device";
constexpr size_t kBackendCount = 1;
#endif

// replicas, dtype, reduce op
class InProcess : public ::testing::TestWithParam<std::tuple<int, std::string, std::string>> {};

TEST_P(InProcess, EveryResultIsRight) {
  const auto [replicas, dtype, op] = GetParam();
  const std::string csv = TempPath("in_process.csv");
  const BenchResult r = RunBench(
      "--in-process --replicas " + std::to_string(replicas) + " --backends " + kBackends +
      " --ops all_reduce,broadcast,all_gather,batch_reduce -b 0 -e 300K -f 7 -w 1 -i 2 -d " +
      dtype + " -o " + op + " --batch-count 50 --batch-bytes 1001 --bytes-per-pack 4K --csv " +
      csv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = ReadCsv(csv);
  // 0, 1, 7, 49, 343, 2401, 16807, 117649 bytes: 8 sizes; all_reduce both placements,
  // broadcast both, all_gather out of place; one batch_reduce row.
  EXPECT_EQ(rows.size(), kBackendCount * (8 * 5 + 1));
  std::set<std::string> backends, ops;
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0u) << row.backend << " " << row.op << " " << row.bytes;
    EXPECT_EQ(row.dtype, dtype);
    if (row.bytes > 0) {
      EXPECT_GT(row.time_us, 0) << row.backend << " " << row.op;
    }
    backends.insert(row.backend);
    ops.insert(row.op);
  }
  EXPECT_EQ(backends.size(), kBackendCount);
  EXPECT_EQ(ops, (std::set<std::string>{"all_reduce", "broadcast", "all_gather", "batch_reduce"}));
  EXPECT_NE(r.out.find("in-process: " + std::to_string(replicas) + " virtual cpu devices"),
            std::string::npos)
      << r.out;
  std::remove(csv.c_str());
}

INSTANTIATE_TEST_SUITE_P(Replicas, InProcess,
                         ::testing::Values(std::make_tuple(1, "f32", "sum"),
                                           std::make_tuple(2, "bf16", "max"),
                                           std::make_tuple(3, "f32", "sum"),
                                           std::make_tuple(3, "i32", "mean"),
                                           std::make_tuple(4, "f64", "prod")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param) + "_" + std::get<2>(info.param);
                         });

// Packing: none, one pack, and packs smaller than a tensor; with and without num_packs.
class InProcessPacking : public ::testing::TestWithParam<std::string> {};

TEST_P(InProcessPacking, BatchReduceIsRight) {
  const std::string csv = TempPath("packing.csv");
  const BenchResult r =
      RunBench("--in-process --replicas 4 --backends " + std::string(kBackends) +
               " --ops batch_reduce --batch-count 333 --batch-bytes 4K -w 0 -i 1 --csv " + csv +
               " " + GetParam());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = ReadCsv(csv);
  ASSERT_EQ(rows.size(), kBackendCount);
  for (const auto& row : rows) {
    EXPECT_EQ(row.op, "batch_reduce");
    EXPECT_EQ(row.bytes, 333u * 4096);
    EXPECT_EQ(row.wrong, 0u) << row.backend;
  }
  std::remove(csv.c_str());
}

INSTANTIATE_TEST_SUITE_P(Packs, InProcessPacking,
                         ::testing::Values("", "--bytes-per-pack 0", "--bytes-per-pack 100K",
                                           "--bytes-per-pack 1000 --num-packs 3"));

TEST(InProcess, StreamBandwidthSaysWhatItCounts) {
  const BenchResult r = RunBench(
      "--in-process --replicas 2 --stream-bandwidth --stream-bytes 4M -b 4K -e 4K -w 0 -i 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("host stream bandwidth: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes moved = 3 x 4M per pass"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace chorus::bench::testing
