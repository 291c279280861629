// Runs the tasks of a local job: starts them with their TF_CONFIG, relays their output line by
// line, and leaves no process behind. A multi-worker job (-n) stops all when one fails (unless
// keep_going); a parameter-server job (--ps/--workers) ends with its chief.
#ifndef CHORUS_TOOLS_LAUNCH_SUPERVISOR_H_
#define CHORUS_TOOLS_LAUNCH_SUPERVISOR_H_

#include <optional>
#include <string>
#include <vector>

namespace chorus::launch {

// One process of the job: TF_CONFIG's task {"type": type, "index": index}, at 127.0.0.1:port.
struct LaunchTask {
  std::string type;  // "chief", "worker", "ps" or "evaluator"
  int index = 0;
  int port = 0;
};

struct LaunchOptions {
  // The tasks in start order; the cluster lists the jobs in the order they first appear here.
  std::vector<LaunchTask> tasks;
  // false: every task a worker, the first failure stops all. true: a parameter-server job, which
  // tolerates the failure of a worker or ps and ends with its chief.
  bool parameter_server = false;
  // A multi-worker job: a worker that fails or is killed does not stop the others; every worker
  // runs to its end (or the time-out), and each one's exit status is printed at the end.
  bool keep_going = false;
  std::optional<double> timeout_seconds;  // stop everything after this long (exit code 124)
  std::vector<std::string> command;       // program and arguments, the same for every task
};

// `count` tasks of type `type` at 127.0.0.1:ports[first], ports[first + 1], ....
void AddTasks(const std::string& type, int count, const std::vector<int>& ports, size_t first,
              std::vector<LaunchTask>* tasks);

// The TF_CONFIG of tasks[i]: {"cluster":{"worker":["127.0.0.1:P",...],...},"task":{"type":
// "worker","index":I}}, in the compact form chorus-launch has always written.
std::string TaskTfConfig(const std::vector<LaunchTask>& tasks, size_t i);

// After the chief of a parameter-server job exits with code 0, how long the other tasks get to
// exit on their own before they are sent SIGTERM (and SIGKILL 5 s later).
inline constexpr int kChiefGraceSeconds = 10;

// Runs one process per task and returns chorus-launch's exit code. A multi-worker job, with
// keep_going or without: 0 when all succeed, else the first failure's exit code (128 + signal
// when a signal killed it). A parameter-server job: the chief's exit code. Either: 124 on
// time-out, 127 when a task cannot be started, 128 + signal when chorus-launch itself was
// interrupted.
int RunTasks(const LaunchOptions& options);

}  // namespace chorus::launch

#endif  // CHORUS_TOOLS_LAUNCH_SUPERVISOR_H_
