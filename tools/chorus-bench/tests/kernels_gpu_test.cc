// chorus-bench --kernels --devices cuda (label gpu): the nccl plugin's GPU kernels checked and
// measured against the device's copy bandwidth. Skips, saying so, without a CUDA device.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "bench_process.h"
#include "kernel_rows.h"

namespace chorus::bench::testing {
namespace {

TEST(KernelsGpu, CudaKernelsAreCheckedAndMeasured) {
  const BenchResult r = RunBench("--kernels --devices cuda -b 1M -e 256M -f 16 -w 2 -i 10");
  if (r.exit_code == 77) GTEST_SKIP() << "no CUDA device here: " << r.out;
  if (r.err.find("no device enumerator of that platform") != std::string::npos) {
    GTEST_SKIP() << "the nccl plugin (the cuda enumerator) is not built here: " << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = KernelRows(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;  // 1M, 16M, 256M
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0u) << row.bytes;
    EXPECT_GT(row.reduce_gbps, 0.0) << row.bytes;
  }
  std::cout << r.out;  // the figures, for the log
}

// Cross-device ops on one GPU (more when the machine has them: CUDA_VISIBLE_DEVICES), nccl among
// them, each result checked.
TEST(InProcessGpu, NcclAndTheKernelPathsOnCudaDevices) {
  const std::string csv = TempPath("gpu.csv");
  const BenchResult r = RunBench(
      "--in-process --devices cuda --replicas 1 --backends nccl,reduction_to_one_device -b 1M "
      "-e 64M -f 8 -w 2 -i 5 --csv " +
      csv);
  if (r.exit_code == 77) GTEST_SKIP() << "no CUDA device here: " << r.out;
  if (r.err.find("no device enumerator of that platform") != std::string::npos) {
    GTEST_SKIP() << "the nccl plugin (the cuda enumerator) is not built here: " << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = ReadCsv(csv);
  ASSERT_EQ(rows.size(), 2u * 3 * 2) << r.out;  // 2 backends x 1M, 8M, 64M x 2 placements
  for (const auto& row : rows) EXPECT_EQ(row.wrong, 0u) << row.backend << " " << row.bytes;
  std::cout << r.out;
}

}  // namespace
}  // namespace chorus::bench::testing
