#include "results_writer.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "csv_output.h"
#include "svg_plot.h"
#include "table_output.h"

namespace chorus::bench {

ResultsWriter::ResultsWriter(std::string csv_path, std::string plot_path, std::string plot_title)
    : csv_path_(std::move(csv_path)),
      plot_path_(std::move(plot_path)),
      plot_title_(std::move(plot_title)) {}

void ResultsWriter::Comment(const std::string& line) { std::cout << "# " << line << "\n"; }

void ResultsWriter::BeginOperation(const std::string& description) {
  std::cout << "#\n# " << description << "\n" << TableHeader() << std::flush;
}

void ResultsWriter::Add(const Measurement* out_of_place, const Measurement* in_place) {
  if (progress_shown_) {
    std::cerr << "\r\033[K" << std::flush;  // clear the progress line
    progress_shown_ = false;
  }
  std::cout << TableRow(out_of_place, in_place) << std::flush;
  if (out_of_place != nullptr) rows_.push_back(*out_of_place);
  if (in_place != nullptr) rows_.push_back(*in_place);
}

void ResultsWriter::Progress(const std::string& what) {
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(2)) return;
  if (isatty(STDERR_FILENO)) {  // one line, rewritten in place
    std::cerr << "\r\033[Kchorus-bench: " << what << std::flush;
    progress_shown_ = true;
  } else if (now - last_progress_ >= std::chrono::seconds(10)) {  // a log: a line now and then
    std::cerr << "chorus-bench: " << what << "\n" << std::flush;
    last_progress_ = now;
  }
}

void ResultsWriter::Finish() {
  if (progress_shown_) std::cerr << "\r\033[K" << std::flush;
  if (!csv_path_.empty()) {
    std::ofstream csv(csv_path_);
    csv << CsvHeader() << "\n";
    for (const auto& m : rows_) csv << CsvRow(m) << "\n";
    csv.close();
    if (!csv) throw std::runtime_error("cannot write --csv file '" + csv_path_ + "'");
  }
  if (!plot_path_.empty()) {
    std::ofstream svg(plot_path_);
    svg << RenderSvgPlot(rows_, plot_title_);
    svg.close();
    if (!svg) throw std::runtime_error("cannot write --plot file '" + plot_path_ + "'");
  }
}

uint64_t ResultsWriter::total_wrong() const {
  uint64_t wrong = 0;
  for (const auto& m : rows_) wrong += m.wrong;
  return wrong;
}

}  // namespace chorus::bench
