// Where measurements go: the table on stdout as they come, a progress line on stderr during
// long sweeps, and at the end the --csv and --plot files.
#ifndef CHORUS_TOOLS_BENCH_RESULTS_WRITER_H_
#define CHORUS_TOOLS_BENCH_RESULTS_WRITER_H_

#include <chrono>
#include <string>
#include <vector>

#include "measurement.h"

namespace chorus::bench {

class ResultsWriter {
 public:
  ResultsWriter(std::string csv_path, std::string plot_path, std::string plot_title);

  // A '#' comment line (the run's settings).
  void Comment(const std::string& line);
  // The column header before the rows of one operation.
  void BeginOperation(const std::string& description);
  // One table line for a backend and size; either measurement may be null (no such form).
  void Add(const Measurement* out_of_place, const Measurement* in_place);
  // "size 5/12 (1M)" on stderr once the run has taken more than 2 s: on a terminal one line
  // rewritten in place, else a line every 10 s.
  void Progress(const std::string& what);
  // Writes the CSV and SVG files; throws std::runtime_error naming a file it cannot write.
  void Finish();
  // Every measurement so far.
  const std::vector<Measurement>& rows() const { return rows_; }
  // Sum of #wrong over every measurement.
  uint64_t total_wrong() const;

 private:
  std::string csv_path_;
  std::string plot_path_;
  std::string plot_title_;
  std::vector<Measurement> rows_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_progress_ = start_;
  bool progress_shown_ = false;  // a terminal line to clear before the next output
};

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_RESULTS_WRITER_H_
