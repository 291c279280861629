// --plot: busbw against size as an SVG line chart written by hand (log2 x axis, linear y axis),
// one polyline per backend (per backend and operation when several operations ran).
#ifndef CHORUS_TOOLS_BENCH_SVG_PLOT_H_
#define CHORUS_TOOLS_BENCH_SVG_PLOT_H_

#include <string>
#include <vector>

#include "measurement.h"

namespace chorus::bench {

// Plots the out-of-place rows (the in-place ones of an operation that has no out-of-place
// form, broadcast). Sizes of 0 bytes cannot sit on a log axis and are left out.
std::string RenderSvgPlot(const std::vector<Measurement>& rows, const std::string& title);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_SVG_PLOT_H_
