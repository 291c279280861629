// Starts N worker processes on 127.0.0.1 with TF_CONFIG set (worker i of N), each with its
// output in a file, and waits for them with a deadline. Nothing outlives the object: every
// process still running is killed (SIGKILL) and reaped in the destructor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace chorus::test {

struct WorkerResult {
  bool exited = false;  // false: still running at the deadline (then killed) or signalled
  int exit_code = -1;
  int signal = 0;
  std::string output;  // stdout and stderr
};

class WorkerProcesses {
 public:
  // Starts `count` processes of `program args...`; `env` entries ("NAME=value") are added,
  // replacing inherited variables of their names. The workers' addresses in TF_CONFIG are `host`:<a
  // free port> ("[::1]" for IPv6), or `host`:`leader_port` for worker 0 when that is not 0.
  WorkerProcesses(int count, const std::string& program, const std::vector<std::string>& args,
                  const std::vector<std::string>& env = {}, const std::string& host = "127.0.0.1",
                  int leader_port = 0);
  ~WorkerProcesses();

  pid_t pid(int worker) const { return pids_[static_cast<size_t>(worker)]; }
  void Kill(int worker, int signal);
  // Waits until every process ended or `timeout` passed; kills the rest.
  std::vector<WorkerResult> Wait(std::chrono::milliseconds timeout);
  // Reaps the processes that ended, without waiting; whether `worker` has.
  bool Done(int worker);
  const std::string& scratch() const { return scratch_; }
  int port(int worker) const { return ports_[static_cast<size_t>(worker)]; }

 private:
  std::string scratch_;
  std::vector<int> ports_;
  std::vector<pid_t> pids_;
  std::vector<WorkerResult> results_;
  std::vector<bool> done_;
};

}  // namespace chorus::test
