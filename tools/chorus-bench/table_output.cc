#include "table_output.h"

#include <cstdio>

namespace chorus::bench {

namespace {

std::string Figures(const Measurement* m) {
  char buffer[96];
  if (m == nullptr) {
    std::snprintf(buffer, sizeof(buffer), " %10s %8s %8s %7s", "n/a", "n/a", "n/a", "n/a");
  } else {
    std::snprintf(buffer, sizeof(buffer), " %10.2f %8.3f %8.3f %7llu", m->time_us, m->algbw_gbps,
                  m->busbw_gbps, static_cast<unsigned long long>(m->wrong));
  }
  return buffer;
}

}  // namespace

std::string TableHeader() {
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer),
                "# %-23s %14s %12s %6s %6s %5s %-36s %-36s\n"
                "# %-23s %14s %12s %6s %6s %5s %10s %8s %8s %7s %10s %8s %8s %7s\n"
                "# %-23s %14s %12s %6s %6s %5s %10s %8s %8s %7s %10s %8s %8s %7s\n",
                "", "", "", "", "", "", "             out-of-place", "               in-place",
                "backend", "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                "#wrong", "time", "algbw", "busbw", "#wrong", "", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return buffer;
}

std::string TableRow(const Measurement* out_of_place, const Measurement* in_place) {
  const Measurement* any = out_of_place != nullptr ? out_of_place : in_place;
  if (any == nullptr) return "";
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), "  %-23s %14llu %12zu %6s %6s %5d", any->backend.c_str(),
                static_cast<unsigned long long>(any->bytes), any->count, any->dtype.c_str(),
                any->reduce_op.empty() ? "none" : any->reduce_op.c_str(), any->root);
  return buffer + Figures(out_of_place) + Figures(in_place) + "\n";
}

}  // namespace chorus::bench
