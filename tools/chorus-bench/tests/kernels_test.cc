// chorus-bench --kernels on the cpu enumerator: every row checked (#wrong 0) and measured, for
// several dtypes and ops; and its bad input.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "bench_process.h"
#include "kernel_rows.h"

namespace chorus::bench::testing {
namespace {

TEST(Kernels, CpuKernelsAreCheckedAndMeasured) {
  const BenchResult r = RunBench("--kernels -b 1K -e 1M -f 32 -w 1 -i 3");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("the 'cpu' enumerator's kernels"), std::string::npos) << r.out;
  const auto rows = KernelRows(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;  // 1K, 32K, 1M
  EXPECT_EQ(rows[0].bytes, 1024u);
  EXPECT_EQ(rows[2].bytes, 1u << 20);
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0u) << row.bytes;
    EXPECT_GT(row.copy_gbps, 0.0) << row.bytes;
    EXPECT_GT(row.reduce_gbps, 0.0) << row.bytes;
  }
}

TEST(Kernels, EveryDtypeAndOpGivesTheExactAnswer) {
  for (const std::string args : {"-d bf16 -o max", "-d f16 -o sum", "-d i8 -o prod",
                                 "-d i64 -o min", "-d f64 -o sum", "-d u8 -o sum"}) {
    const BenchResult r = RunBench("--kernels -b 4K -e 64K -f 16 -w 0 -i 1 " + args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.out << r.err;
    const auto rows = KernelRows(r.out);
    ASSERT_EQ(rows.size(), 2u) << args << "\n" << r.out;
    for (const auto& row : rows) EXPECT_EQ(row.wrong, 0u) << args << " " << row.bytes;
  }
}

TEST(Kernels, BadInputNamesTheProblem) {
  struct Case {
    std::string args, phrase;
  };
  for (const Case& c : std::vector<Case>{
           {"--kernels -o mean", "the reduce kernel takes sum, prod, min or max"},
           {"--kernels --devices tpu", "--devices tpu: no device enumerator of that platform"},
           {"--kernels -n 2", "--kernels runs in this process alone"},
           {"--kernels --csv x.csv", "--kernels prints its table only"},
           {"--devices cuda", "--devices is for --kernels and --in-process"},
           {"--in-process --devices tpu",
            "--devices tpu: no device enumerator of that platform"}}) {
    const BenchResult r = RunBench(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(c.phrase), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace chorus::bench::testing
