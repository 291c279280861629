// --transports' figures and output: MB/s in 2^20 bytes, the table's layout (transports side by
// side), the CSV rows, and the checked messages' pattern.
#include "transport_output.h"

#include <gtest/gtest.h>

#include <vector>

#include "p2p_measure.h"

namespace chorus::bench {
namespace {

TEST(TransportOutput, MebibytesPerSecondAsUcxPerftest) {
  EXPECT_DOUBLE_EQ(MebibytesPerSecond(1 << 20, 1e6), 1.0);  // 1 MiB in a second
  EXPECT_DOUBLE_EQ(MebibytesPerSecond(16 << 20, 1e3), 16000.0);
  EXPECT_EQ(MebibytesPerSecond(4096, 0), 0);
}

TEST(TransportOutput, TableHasTheTransportsSideBySide) {
  const std::string header = TransportTableHeader({"tcp", "ucx"});
  EXPECT_NE(header.find(" tcp "), std::string::npos) << header;
  EXPECT_LT(header.find(" tcp "), header.find(" ucx ")) << header;
  EXPECT_NE(header.find("latency"), std::string::npos);
  EXPECT_NE(header.find("(MB/s)"), std::string::npos);
  std::vector<std::string> lines;
  for (size_t at = 0, next; at < header.size(); at = next + 1) {
    next = header.find('\n', at);
    lines.push_back(header.substr(at, next - at));
    EXPECT_EQ(header[at], '#');
  }
  ASSERT_EQ(lines.size(), 3u);
  const std::string row =
      TransportTableRow({{"tcp", 4096, 16, 25.125, 812.5, 0}, {"ucx", 4096, 16, 3.5, 2048, 7}});
  EXPECT_EQ(
      row,
      "          4096     16       25.12      812.50       0        3.50     2048.00       7\n");
  // The row lines up under the header: each transport's figures end where its columns do.
  EXPECT_EQ(row.size() - 1, lines[1].size()) << lines[1] << "\n" << row;
  EXPECT_EQ(TransportTableRow({}), "");
}

TEST(TransportOutput, CsvRows) {
  EXPECT_EQ(TransportCsvHeader(),
            "transport,bytes,window,latency_us,bandwidth_MBps,wrong,latency_mean_us");
  EXPECT_EQ(TransportCsvRow({"tcp", 4096, 16, 25.125, 812.5, 0, 27}),
            "tcp,4096,16,25.125,812.500,0,27.000");
}

TEST(P2pPattern, CheckedMessagesDifferPerStampAndNeverLookUnwritten) {
  std::vector<uint8_t> a(70000), b(70000);
  FillPattern(a.data(), a.size(), 4);
  FillPattern(b.data(), b.size(), 5);
  EXPECT_EQ(CountWrongBytes(a.data(), a.size(), 4), 0u);
  EXPECT_EQ(CountWrongBytes(b.data(), b.size(), 4), b.size());  // another stamp: every byte
  for (uint8_t byte : a) ASSERT_NE(byte, 0xff);
  // A block of 256 bytes landing 256 bytes off is caught.
  std::copy(a.begin() + 256, a.begin() + 512, a.begin());
  EXPECT_EQ(CountWrongBytes(a.data(), a.size(), 4), 256u);
  a[69999] ^= 1;
  EXPECT_EQ(CountWrongBytes(a.data(), a.size(), 4), 257u);
}

}  // namespace
}  // namespace chorus::bench
