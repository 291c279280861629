// The rows of chorus-bench --kernels' table, parsed.
#ifndef CHORUS_TOOLS_BENCH_TESTS_KERNEL_ROWS_H_
#define CHORUS_TOOLS_BENCH_TESTS_KERNEL_ROWS_H_

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace chorus::bench::testing {

struct KernelRow {
  uint64_t bytes = 0, count = 0;
  std::string dtype, reduce_op;
  double copy_us = 0, copy_gbps = 0, reduce_us = 0, reduce_gbps = 0, ratio = 0;
  uint64_t wrong = 0;
};

// Every line of `out` that starts with two spaces (a row; comments start with '#').
inline std::vector<KernelRow> KernelRows(const std::string& out) {
  std::vector<KernelRow> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  ", 0) != 0) continue;
    std::istringstream in(line);
    KernelRow row;
    in >> row.bytes >> row.count >> row.dtype >> row.reduce_op >> row.copy_us >> row.copy_gbps >>
        row.reduce_us >> row.reduce_gbps >> row.ratio >> row.wrong;
    if (in) rows.push_back(row);
  }
  return rows;
}

}  // namespace chorus::bench::testing

#endif  // CHORUS_TOOLS_BENCH_TESTS_KERNEL_ROWS_H_
