#include "bench_process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace chorus::bench::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string TempPath(const std::string& name) {
  static int counter = 0;
  return ::testing::TempDir() + "chorus_bench_" + std::to_string(getpid()) + "_" +
         std::to_string(counter++) + "_" + name;
}

BenchResult RunBench(const std::string& args) {
  const std::string out = TempPath("stdout"), err = TempPath("stderr");
  const std::string command = "CHORUS_PLUGIN_PATH=" BENCH_WRONG_PLUGIN_DIR
                              " timeout -k 5 240 " CHORUS_BENCH " " +
                              args + " >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  BenchResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return result;
}

std::vector<CsvRow> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<CsvRow> rows;
  if (!std::getline(in, line)) return rows;
  EXPECT_EQ(line, "backend,op,bytes,dtype,time_us,algbw_gbps,busbw_gbps,wrong,in_place");
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) f.push_back(field);
    EXPECT_EQ(f.size(), 9u) << line;
    if (f.size() != 9) continue;
    CsvRow row;
    row.backend = f[0];
    row.op = f[1];
    row.bytes = std::stoull(f[2]);
    row.dtype = f[3];
    row.time_us = std::stod(f[4]);
    row.algbw = std::stod(f[5]);
    row.busbw = std::stod(f[6]);
    row.wrong = std::stoull(f[7]);
    row.in_place = f[8] == "1";
    rows.push_back(row);
  }
  return rows;
}

}  // namespace chorus::bench::testing
