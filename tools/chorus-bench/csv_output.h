// --csv: one row per measurement.
#ifndef CHORUS_TOOLS_BENCH_CSV_OUTPUT_H_
#define CHORUS_TOOLS_BENCH_CSV_OUTPUT_H_

#include <string>

#include "measurement.h"

namespace chorus::bench {

// "backend,op,bytes,dtype,time_us,algbw_gbps,busbw_gbps,wrong,in_place"
std::string CsvHeader();
// e.g. "gloo,all_reduce,4096,f32,12.345,0.332,0.332,0,0" (no newline).
std::string CsvRow(const Measurement& m);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_CSV_OUTPUT_H_
