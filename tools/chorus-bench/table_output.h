// The nccl-tests-like table on stdout: one line per backend and size, out-of-place figures then
// in-place figures.
#ifndef CHORUS_TOOLS_BENCH_TABLE_OUTPUT_H_
#define CHORUS_TOOLS_BENCH_TABLE_OUTPUT_H_

#include <string>

#include "measurement.h"

namespace chorus::bench {

// The three header lines (each starting with '#', ending with a newline).
std::string TableHeader();
// One line (with newline) for the measurements of one backend and size; either may be null
// (an operation without that form), its columns then read "n/a".
std::string TableRow(const Measurement* out_of_place, const Measurement* in_place);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_TABLE_OUTPUT_H_
