// chorus-bench's command line.
#ifndef CHORUS_TOOLS_BENCH_OPTIONS_H_
#define CHORUS_TOOLS_BENCH_OPTIONS_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collective_kind.h"

namespace chorus::bench {

struct BenchOptions {
  std::vector<std::string> backends;  // empty: the mode's default
  // --auto: the backend `auto` (the communicator AUTO makes) beside every candidate that serves
  // the job, and AUTO's regret per size.
  bool auto_mode = false;
  // --transports: measure these transports (plugin.h interface 5) point to point instead.
  std::vector<std::string> transports;
  int window = 16;  // --transports: messages in flight in the streaming test
  std::vector<CollectiveKind> ops = {CollectiveKind::kAllReduce};
  uint64_t min_bytes = 4096;
  uint64_t max_bytes = 64 << 20;
  uint64_t factor = 4;
  chorus_dtype dtype = CHORUS_F32;
  chorus_reduce_op reduce_op = CHORUS_REDUCE_SUM;
  int root = 0;
  int warmup_iters = 5;
  int iters = 20;
  int repeats = 1;
  int workers = 0;  // -n: start this many local workers; 0 = run as one worker of a job
  int hosts = 1;    // -n: the workers play this many hosts (CHORUS_HOST_ID), host by host
  bool in_process = false;
  bool kernels = false;         // --kernels: the device enumerator's copy and reduce kernels
  std::string devices = "cpu";  // --devices: the enumerator (platform) of --kernels, --in-process
  int replicas = 2;
  uint64_t batch_count = 1000;
  uint64_t batch_bytes = 4096;
  int64_t bytes_per_pack = -1;  // -1: tensors go to batch_reduce as they are
  std::optional<int> num_packs;
  bool stream_bandwidth = false;
  uint64_t stream_bytes = 128 << 20;
  std::string csv_path;
  std::string plot_path;
  bool suggest_rules = false;    // print CHORUS_ALGORITHM rules from the run's fastest backends
  std::string tuning_file;       // also write them as a tuning file (CHORUS_TUNING_FILE) here
  double timeout_seconds = 120;  // each collective
  double job_timeout_seconds = 3600;  // -n: the whole job
  std::vector<std::string> argv;      // as given, to start the workers with
};

// Parses the command line. Returns the exit code when the program should stop now: 0 after
// --help, 2 after a bad argument (the message is printed on stderr).
std::optional<int> ParseOptions(int argc, char** argv, BenchOptions* options);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_OPTIONS_H_
