#include "local_job.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "ports.h"  // tools/chorus-launch
#include "spawn.h"  // tools/chorus-launch

extern char** environ;

namespace chorus::bench {

namespace {

std::string TfConfig(const std::vector<int>& ports, int index) {
  std::string workers;
  for (size_t i = 0; i < ports.size(); ++i) {
    workers += (i ? ",\"127.0.0.1:" : "\"127.0.0.1:") + std::to_string(ports[i]) + "\"";
  }
  return "{\"cluster\":{\"worker\":[" + workers +
         "]},\"task\":{\"type\":\"worker\",\"index\":" + std::to_string(index) + "}}";
}

std::string SelfPath() {
  char path[4096];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(path, static_cast<size_t>(length));
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// SIGTERM to every live worker's process group, SIGKILL after 2 s; reaps them all. A stopped
// worker is continued, so that it acts on the SIGTERM now rather than at the SIGKILL.
void StopAll(std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (pid > 0) {
      kill(-pid, SIGTERM);
      kill(-pid, SIGCONT);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (pid_t& pid : pids) {
    while (pid > 0) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
      } else if (std::chrono::steady_clock::now() > deadline) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

}  // namespace

int RunLocalJob(const std::vector<std::string>& argv, int workers, int hosts,
                double timeout_seconds) {
  std::vector<int> ports;
  std::string self;
  try {
    ports = launch::PickFreePorts(workers);
    self = SelfPath();
  } catch (const std::exception& e) {
    std::cerr << "chorus-bench: " << e.what() << "\n";
    return 127;
  }
  std::vector<std::string> args = argv;
  args[0] = self;
  std::vector<char*> arg_pointers;
  for (auto& arg : args) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);

  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (strncmp(*entry, "TF_CONFIG=", 10) == 0) continue;
      if (hosts > 1 && strncmp(*entry, "CHORUS_HOST_ID=", 15) == 0) continue;
      env.emplace_back(*entry);
    }
    env.push_back("TF_CONFIG=" + TfConfig(ports, w));
    if (hosts > 1) {
      env.push_back("CHORUS_HOST_ID=bench-host-" + std::to_string(w / (workers / hosts)));
    }
    env.push_back(std::string(kWorkerMarker) + "=1");
    std::vector<char*> env_pointers;
    for (auto& entry : env) env_pointers.push_back(entry.data());
    env_pointers.push_back(nullptr);
    int error = 0;
    const pid_t pid = launch::SpawnWorker(arg_pointers.data(), env_pointers.data(), STDOUT_FILENO,
                                          STDERR_FILENO, &error);
    if (pid < 0) {
      std::cerr << "chorus-bench: cannot start worker " << w << " (" << self
                << "): " << strerror(error) << "\n";
      StopAll(pids);
      return 127;
    }
    pids.push_back(pid);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  int live = workers;
  while (live > 0) {
    bool reaped = false;
    for (int w = 0; w < workers; ++w) {
      int status = 0;
      if (pids[w] <= 0 || waitpid(pids[w], &status, WNOHANG) != pids[w]) continue;
      pids[w] = -1;
      --live;
      reaped = true;
      const int code = ExitCodeOf(status);
      if (code != 0) {
        // The others may be finishing on their own (worker 0 exits 1 after wrong results,
        // when the others are done): a moment before stopping them.
        const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        for (pid_t& pid : pids) {
          while (pid > 0 && std::chrono::steady_clock::now() < grace) {
            if (waitpid(pid, &status, WNOHANG) == pid) {
              pid = -1;
            } else {
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
          }
          if (pid > 0) {
            std::cerr << "chorus-bench: worker " << w << " failed (exit code " << code
                      << "); stopping the other workers\n";
            break;
          }
        }
        StopAll(pids);
        return code;
      }
    }
    if (!reaped) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << "chorus-bench: the job ran past --job-timeout " << timeout_seconds
                  << " s; stopping the workers\n";
        StopAll(pids);
        return 124;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return 0;
}

}  // namespace chorus::bench
