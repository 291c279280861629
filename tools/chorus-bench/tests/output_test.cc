// The CSV row format, the table lines and the SVG plot (one polyline per backend).
#include <gtest/gtest.h>

#include <string>

#include "csv_output.h"
#include "svg_plot.h"
#include "table_output.h"

namespace chorus::bench {
namespace {

Measurement BandwidthRow(const std::string& backend, uint64_t bytes, double busbw,
                         bool in_place = false, CollectiveKind op = CollectiveKind::kAllReduce) {
  Measurement m;
  m.backend = backend;
  m.op = op;
  m.bytes = bytes;
  m.count = bytes / 4;
  m.dtype = "f32";
  m.reduce_op = "sum";
  m.in_place = in_place;
  m.time_us = 12.3456;
  m.algbw_gbps = 0.5;
  m.busbw_gbps = busbw;
  m.wrong = 3;
  return m;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Csv, HeaderHasTheAgreedColumnsFirst) {
  EXPECT_EQ(CsvHeader().rfind("backend,op,bytes,dtype,time_us,algbw_gbps,busbw_gbps,wrong", 0), 0u);
  EXPECT_EQ(CsvHeader(), "backend,op,bytes,dtype,time_us,algbw_gbps,busbw_gbps,wrong,in_place");
}

TEST(Csv, RowFormat) {
  EXPECT_EQ(CsvRow(BandwidthRow("gloo", 4096, 0.25)),
            "gloo,all_reduce,4096,f32,12.346,0.500000,0.250000,3,0");
  EXPECT_EQ(CsvRow(BandwidthRow("core_ring", 0, 0, true, CollectiveKind::kReduceScatter)),
            "core_ring,reduce_scatter,0,f32,12.346,0.500000,0.000000,3,1");
  // As many fields as the header.
  EXPECT_EQ(Count(CsvRow(BandwidthRow("x", 1, 1)), ","), Count(CsvHeader(), ","));
}

TEST(Table, RowShowsBothPlacementsOrNa) {
  const Measurement out = BandwidthRow("gloo", 4096, 0.25),
                    in = BandwidthRow("gloo", 4096, 0.125, true);
  const std::string both = TableRow(&out, &in);
  EXPECT_NE(both.find("gloo"), std::string::npos);
  EXPECT_NE(both.find("4096"), std::string::npos);
  EXPECT_NE(both.find("12.35"), std::string::npos);
  EXPECT_NE(both.find("0.250"), std::string::npos);
  EXPECT_NE(both.find("0.125"), std::string::npos);
  EXPECT_EQ(both.back(), '\n');
  const std::string in_only = TableRow(nullptr, &in);
  EXPECT_EQ(Count(in_only, "n/a"), 4u);
  EXPECT_EQ(TableRow(nullptr, nullptr), "");
  const std::string header = TableHeader();
  EXPECT_EQ(Count(header, "\n"), 3u);
  EXPECT_EQ(Count(header, "#wrong"), 2u);
  EXPECT_NE(header.find("busbw"), std::string::npos);
}

TEST(Svg, OnePolylinePerBackendWithAxesAndLegend) {
  std::vector<Measurement> rows;
  for (const std::string backend : {"core_ring", "gloo", "ring_grpc"}) {
    for (uint64_t bytes : {uint64_t{0}, uint64_t{4096}, uint64_t{65536}, uint64_t{1} << 20}) {
      rows.push_back(BandwidthRow(backend, bytes, static_cast<double>(bytes) / 1e6));
      rows.push_back(BandwidthRow(backend, bytes, 1, true));  // in-place rows are not plotted
    }
  }
  const std::string svg = RenderSvgPlot(rows, "title <&>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline"), 3u);
  for (const std::string backend : {"core_ring", "gloo", "ring_grpc"}) {
    EXPECT_NE(svg.find(">" + backend + "</text>"), std::string::npos) << backend;  // legend
  }
  EXPECT_NE(svg.find("busbw (GB/s)"), std::string::npos);
  EXPECT_NE(svg.find("size (bytes, log scale)"), std::string::npos);
  EXPECT_NE(svg.find(">4K</text>"), std::string::npos);  // x tick labels
  EXPECT_NE(svg.find(">1M</text>"), std::string::npos);
  EXPECT_NE(svg.find("title &lt;&amp;&gt;"), std::string::npos);
  // Three sizes above 0 per backend: three points in each polyline.
  const size_t first = svg.find("points=\"");
  const size_t end = svg.find('"', first + 8);
  EXPECT_EQ(Count(svg.substr(first, end - first), ","), 3u);
}

TEST(Svg, BroadcastHasOnlyInPlaceRowsAndIsPlotted) {
  std::vector<Measurement> rows = {BandwidthRow("gloo", 4096, 1, true, CollectiveKind::kBroadcast),
                                   BandwidthRow("gloo", 8192, 2, true, CollectiveKind::kBroadcast)};
  EXPECT_EQ(Count(RenderSvgPlot(rows, "t"), "<polyline"), 1u);
  EXPECT_EQ(Count(RenderSvgPlot({}, "t"), "<polyline"), 0u);
}

TEST(Svg, SeveralOperationsGetOneLineEach) {
  std::vector<Measurement> rows = {
      BandwidthRow("gloo", 4096, 1),
      BandwidthRow("gloo", 4096, 1, false, CollectiveKind::kAllGather)};
  const std::string svg = RenderSvgPlot(rows, "t");
  EXPECT_EQ(Count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find(">gloo all_gather</text>"), std::string::npos);
}

}  // namespace
}  // namespace chorus::bench
