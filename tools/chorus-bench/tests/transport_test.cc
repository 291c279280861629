// chorus-bench -n 2 --transports end to end, with real worker processes on 127.0.0.1: the core's
// tcp and a plugin's transport (the SDK's template "store") found by name, a row per size with
// no wrong byte; bench_wrong's transport, which delivers nothing, shows wrong bytes. Times are
// printed, never asserted.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "bench_process.h"

namespace chorus::bench::testing {
namespace {

struct TransportRow {
  std::string transport;
  uint64_t bytes = 0;
  int window = 0;
  double latency_us = 0, bandwidth_mbps = 0;
  uint64_t wrong = 0;
  double latency_mean_us = 0;
};

std::vector<TransportRow> ReadTransportCsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<TransportRow> rows;
  if (!std::getline(in, line)) return rows;
  EXPECT_EQ(line, "transport,bytes,window,latency_us,bandwidth_MBps,wrong,latency_mean_us");
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) f.push_back(field);
    EXPECT_EQ(f.size(), 7u) << line;
    if (f.size() != 7) continue;
    rows.push_back({f[0], std::stoull(f[1]), std::stoi(f[2]), std::stod(f[3]), std::stod(f[4]),
                    std::stoull(f[5]), std::stod(f[6])});
  }
  return rows;
}

// The table's lines of figures: those that start with two spaces and a size.
size_t TableRows(const std::string& out) {
  size_t rows = 0;
  std::stringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    rows += line.rfind("  ", 0) == 0 && line.find_first_not_of(' ') != std::string::npos &&
            std::isdigit(static_cast<unsigned char>(line[line.find_first_not_of(' ')]));
  }
  return rows;
}

TEST(Transports, TcpPrintsARowPerSizeWithNoWrongByte) {
  const std::string csv = TempPath("tcp.csv");
  // 8, 64, ..., 256K and 2M (a window of 16 x 2M).
  const BenchResult r =
      RunBench("-n 2 --transports tcp -e 2M -f 8 -w 1 -i 3 --timeout 60 --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<uint64_t> sizes = {8, 64, 512, 4096, 32768, 262144, 2097152};
  EXPECT_EQ(TableRows(r.out), sizes.size()) << r.out;
  EXPECT_NE(r.out.find("latency"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bandwidth"), std::string::npos) << r.out;
  const auto rows = ReadTransportCsv(csv);
  ASSERT_EQ(rows.size(), sizes.size()) << ReadFile(csv);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].transport, "tcp");
    EXPECT_EQ(rows[i].bytes, sizes[i]);
    EXPECT_EQ(rows[i].window, 16);
    EXPECT_EQ(rows[i].wrong, 0u) << rows[i].bytes;
    EXPECT_GT(rows[i].latency_us, 0) << rows[i].bytes;
    EXPECT_GT(rows[i].latency_mean_us, 0) << rows[i].bytes;
    EXPECT_GT(rows[i].bandwidth_mbps, 0) << rows[i].bytes;
  }
  std::remove(csv.c_str());
}

// A plugin's transport needs nothing but its name; sizes from 0, the transports alternating
// over repeats, a window of 4.
TEST(Transports, APluginTransportBesideTcp) {
  const std::string csv = TempPath("store.csv");
  const BenchResult r = RunBench(
      "-n 2 --transports tcp,store -b 0 -e 64K -f 16 -w 1 -i 2 -R 2 --window 4 --timeout 60 "
      "--csv " +
      csv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(TableRows(r.out), 6u) << r.out;  // 0, 1, 16, 256, 4K, 64K
  const auto rows = ReadTransportCsv(csv);
  ASSERT_EQ(rows.size(), 12u) << ReadFile(csv);
  std::map<std::string, int> per_transport;
  for (const auto& row : rows) {
    ++per_transport[row.transport];
    EXPECT_EQ(row.window, 4);
    EXPECT_EQ(row.wrong, 0u) << row.transport << " " << row.bytes;
  }
  EXPECT_EQ(per_transport["tcp"], 6);
  EXPECT_EQ(per_transport["store"], 6);
  std::remove(csv.c_str());
}

TEST(Transports, ATransportThatDeliversNothingHasWrongBytes) {
  const std::string csv = TempPath("wrong.csv");
  const BenchResult r = RunBench(
      "-n 2 --transports tcp,bench_wrong -b 8 -e 4K -f 8 -w 1 -i 2 --timeout 60 --csv " + csv);
  EXPECT_EQ(r.exit_code, 1) << "wrong bytes must fail the run\n" << r.out << r.err;
  EXPECT_NE(r.err.find("wrong bytes in total"), std::string::npos) << r.err;
  const auto rows = ReadTransportCsv(csv);
  ASSERT_EQ(rows.size(), 8u) << ReadFile(csv);  // 8, 64, 512, 4K for each
  for (const auto& row : rows) {
    if (row.transport == "tcp") {
      EXPECT_EQ(row.wrong, 0u) << row.bytes;
    } else {
      // Both checked messages of both tests on both ranks: every byte is wrong.
      EXPECT_GE(row.wrong, 4 * row.bytes) << row.bytes;
    }
  }
  std::remove(csv.c_str());
}

}  // namespace
}  // namespace chorus::bench::testing
