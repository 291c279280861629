// Runs the chorus-bench executable as a user would, and reads its CSV output.
#ifndef CHORUS_TOOLS_BENCH_TESTS_BENCH_PROCESS_H_
#define CHORUS_TOOLS_BENCH_TESTS_BENCH_PROCESS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::bench::testing {

struct BenchResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs chorus-bench with `args` (shell words, already quoted where needed) with
// CHORUS_PLUGIN_PATH naming the test plugin's folder; stops it after 240 s.
BenchResult RunBench(const std::string& args);

struct CsvRow {
  std::string backend, op, dtype;
  uint64_t bytes = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  uint64_t wrong = 0;
  bool in_place = false;
};
// The rows of a CSV file chorus-bench wrote (the header checked and skipped).
std::vector<CsvRow> ReadCsv(const std::string& path);

// A fresh file name in the test's temporary folder.
std::string TempPath(const std::string& name);

std::string ReadFile(const std::string& path);

}  // namespace chorus::bench::testing

#endif  // CHORUS_TOOLS_BENCH_TESTS_BENCH_PROCESS_H_
