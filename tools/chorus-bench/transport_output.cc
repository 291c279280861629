#include "transport_output.h"

#include <cstdio>

namespace chorus::bench {

namespace {

constexpr double kMebibyte = 1024.0 * 1024.0;

}  // namespace

double MebibytesPerSecond(uint64_t bytes, double time_us) {
  if (time_us <= 0) return 0;
  return static_cast<double>(bytes) / (time_us * 1e-6) / kMebibyte;
}

std::string TransportTableHeader(const std::vector<std::string>& transports) {
  std::string names = "# " + std::string(12 + 1 + 6, ' ');
  std::string columns = "# " + std::string(12 - 4, ' ') + "size window";
  std::string units = "# " + std::string(12 - 3, ' ') + "(B)       ";
  for (const auto& transport : transports) {
    char buffer[160];
    // 10 + 1 + 11 + 1 + 7 = 30 columns per transport, its name centred over them.
    std::string title = " " + transport + " ";
    const size_t width = 30;
    if (title.size() < width) {
      const size_t left = (width - title.size()) / 2;
      title = std::string(left, '-') + title + std::string(width - title.size() - left, '-');
    }
    names += "  " + title;
    std::snprintf(buffer, sizeof(buffer), "  %10s %11s %7s", "latency", "bandwidth", "#wrong");
    columns += buffer;
    std::snprintf(buffer, sizeof(buffer), "  %10s %11s %7s", "(us)", "(MB/s)", "");
    units += buffer;
  }
  return names + "\n" + columns + "\n" + units + "\n";
}

std::string TransportTableRow(const std::vector<TransportFigures>& figures) {
  if (figures.empty()) return "";
  char buffer[160];
  std::snprintf(buffer, sizeof(buffer), "  %12llu %6d",
                static_cast<unsigned long long>(figures.front().bytes), figures.front().window);
  std::string line = buffer;
  for (const auto& f : figures) {
    std::snprintf(buffer, sizeof(buffer), "  %10.2f %11.2f %7llu", f.latency_us, f.bandwidth_mbps,
                  static_cast<unsigned long long>(f.wrong));
    line += buffer;
  }
  return line + "\n";
}

std::string TransportCsvHeader() {
  return "transport,bytes,window,latency_us,bandwidth_MBps,wrong,latency_mean_us";
}

std::string TransportCsvRow(const TransportFigures& f) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), "%s,%llu,%d,%.3f,%.3f,%llu,%.3f", f.transport.c_str(),
                static_cast<unsigned long long>(f.bytes), f.window, f.latency_us, f.bandwidth_mbps,
                static_cast<unsigned long long>(f.wrong), f.latency_mean_us);
  return buffer;
}

}  // namespace chorus::bench
