#include "csv_output.h"

#include <cstdio>

namespace chorus::bench {

std::string CsvHeader() {
  return "backend,op,bytes,dtype,time_us,algbw_gbps,busbw_gbps,wrong,in_place";
}

std::string CsvRow(const Measurement& m) {
  char figures[128];
  std::snprintf(figures, sizeof(figures), "%.3f,%.6f,%.6f", m.time_us, m.algbw_gbps, m.busbw_gbps);
  return m.backend + "," + CollectiveName(m.op) + "," + std::to_string(m.bytes) + "," + m.dtype +
         "," + figures + "," + std::to_string(m.wrong) + "," + (m.in_place ? "1" : "0");
}

}  // namespace chorus::bench
