// A parameter-server job's ps and worker tasks as real processes on 127.0.0.1, each running
// ps_test_task under its own TF_CONFIG; the test process is the chief (resolver()). Nothing
// outlives the object: every task still running is killed (SIGKILL) and reaped.
#pragma once

#include <chorus/cluster_resolver/cluster_resolver.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus::test {

class PsCluster {
 public:
  PsCluster(int num_ps, int num_workers, const std::vector<std::string>& env = {});
  ~PsCluster();

  // The chief's resolver (this process).
  std::unique_ptr<ClusterResolver> resolver() const;
  std::string tf_config(const std::string& type, int index) const;
  void Kill(const std::string& type, int index, int signal);
  // Starts the task again at the same address (after Kill).
  void Restart(const std::string& type, int index);
  // Whether the task's process ended; its output so far.
  bool Exited(const std::string& type, int index, int* exit_code = nullptr);
  std::string Output(const std::string& type, int index) const;
  // Waits up to timeout_ms for every task to exit; true when all did.
  bool WaitAll(int timeout_ms);
  // Runs one more process as the task (its TF_CONFIG; `env` added to its environment) and waits
  // up to timeout_ms for it to exit: its exit code, or -1 when it still ran (then it is killed);
  // its output in *output.
  int RunProcessAs(const std::string& type, int index, int timeout_ms, std::string* output,
                   const std::vector<std::string>& env = {});

 private:
  struct Task {
    std::string type;
    int index = 0;
    pid_t pid = -1;
    bool reaped = false;
    int status = 0;
    int starts = 0;
    std::string log_name = {};          // the log file's name; "<type>-<index>" when empty
    std::vector<std::string> env = {};  // added to the cluster's
  };
  Task& Find(const std::string& type, int index);
  const Task& Find(const std::string& type, int index) const;
  void Start(Task& task);
  std::string LogPath(const Task& task) const;

  std::string scratch_;
  std::string cluster_json_;
  ClusterSpec spec_;
  std::vector<std::string> env_;
  std::vector<Task> tasks_;
};

}  // namespace chorus::test
