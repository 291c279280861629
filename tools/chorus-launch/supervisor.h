// Runs the workers of a local multi-worker job: starts them with their TF_CONFIG, relays their
// output line by line, stops them all when one fails, and leaves no process behind.
#ifndef CHORUS_TOOLS_LAUNCH_SUPERVISOR_H_
#define CHORUS_TOOLS_LAUNCH_SUPERVISOR_H_

#include <optional>
#include <string>
#include <vector>

namespace chorus::launch {

struct LaunchOptions {
  std::vector<int> ports;                 // worker i listens on 127.0.0.1:ports[i]
  std::optional<double> timeout_seconds;  // stop everything after this long (exit code 124)
  std::vector<std::string> command;       // program and arguments, the same for every worker
};

// The TF_CONFIG of worker `index` in a cluster of workers on 127.0.0.1 at `ports`.
std::string WorkerTfConfig(const std::vector<int>& ports, int index);

// Runs one process per port and returns chorus-launch's exit code: 0 when all succeed, else the
// first failure's exit code (128 + signal when a signal killed it), 124 on time-out, 127 when a
// worker cannot be started, 128 + signal when chorus-launch itself was interrupted.
int RunWorkers(const LaunchOptions& options);

}  // namespace chorus::launch

#endif  // CHORUS_TOOLS_LAUNCH_SUPERVISOR_H_
