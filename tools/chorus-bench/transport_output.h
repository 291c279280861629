// chorus-bench --transports' output: a table with one line per size and the transports side by
// side (latency, bandwidth, #wrong each), and --csv rows, one per transport and size.
#ifndef CHORUS_TOOLS_BENCH_TRANSPORT_OUTPUT_H_
#define CHORUS_TOOLS_BENCH_TRANSPORT_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::bench {

// One transport's figures at one size.
struct TransportFigures {
  std::string transport;
  uint64_t bytes = 0;
  int window = 0;              // messages in flight in the streaming test
  double latency_us = 0;       // median half round trip
  double bandwidth_mbps = 0;   // MB/s, MB = 2^20 bytes (ucx_perftest's unit)
  uint64_t wrong = 0;          // wrong bytes in the checked messages, both ranks
  double latency_mean_us = 0;  // mean half round trip (fi_pingpong's usec/xfer is a mean)
};

// MB/s (2^20 bytes per second) of `bytes` moved in `time_us`; 0 when time_us is 0.
double MebibytesPerSecond(uint64_t bytes, double time_us);

// The header lines ('#' each, newline-terminated) for these transports in this order.
std::string TransportTableHeader(const std::vector<std::string>& transports);
// One line (with newline): the size, the window, then each transport's figures in order.
std::string TransportTableRow(const std::vector<TransportFigures>& figures);

// "transport,bytes,window,latency_us,bandwidth_MBps,wrong,latency_mean_us"
std::string TransportCsvHeader();
// e.g. "tcp,4096,16,25.125,812.500,0,27.000" (no newline).
std::string TransportCsvRow(const TransportFigures& figures);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_TRANSPORT_OUTPUT_H_
