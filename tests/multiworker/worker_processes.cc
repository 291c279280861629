#include "worker_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "chorus-launch/ports.h"

extern char** environ;

namespace chorus::test {
namespace {

// chorus-launch's choice of ports, never one this test process handed out before. Jobs started at
// once from several threads (WorkerFault runs four) pick their ports independently, and a port
// that one pick has just released may be another's: once a leader found its store port taken by
// another job's worker ("port ... is in use by another program").
std::vector<int> PickPortsNotHandedOut(int count) {
  static std::mutex mutex;
  static std::set<int> handed_out;
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<int> ports;
  for (int attempt = 0; attempt < 64; ++attempt) {
    ports = launch::PickFreePorts(count);
    if (std::none_of(ports.begin(), ports.end(), [](int port) { return handed_out.count(port); })) {
      break;
    }
  }
  handed_out.insert(ports.begin(), ports.end());
  return ports;
}

}  // namespace

WorkerProcesses::WorkerProcesses(int count, const std::string& program,
                                 const std::vector<std::string>& args,
                                 const std::vector<std::string>& env, const std::string& host,
                                 int leader_port) {
  char pattern[] = "/tmp/chorus_workers_XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  scratch_ = pattern;
  std::string cluster;
  // chorus-launch's choice: below the ephemeral range, where no program's bind(0) or connect()
  // takes a port between this choice and the worker's bind.
  const std::vector<int> free_ports = PickPortsNotHandedOut(count);
  for (int i = 0; i < count; ++i) {
    ports_.push_back(i == 0 && leader_port != 0 ? leader_port : free_ports[static_cast<size_t>(i)]);
    cluster += (i ? ",\"" : "\"") + host + ":" + std::to_string(ports_.back()) + "\"";
  }
  for (int i = 0; i < count; ++i) {
    std::vector<std::string> environment;
    // An entry of `env` replaces the inherited variable of its name (a process reads the first).
    auto replaced = [&](const std::string& entry) {
      const std::string name = entry.substr(0, entry.find('=') + 1);
      if (name == "TF_CONFIG=") return true;
      return std::any_of(env.begin(), env.end(),
                         [&](const std::string& mine) { return mine.rfind(name, 0) == 0; });
    };
    for (char** e = environ; *e != nullptr; ++e) {
      if (!replaced(*e)) environment.push_back(*e);
    }
    environment.push_back("TF_CONFIG={\"cluster\":{\"worker\":[" + cluster +
                          "]},\"task\":{\"type\":\"worker\",\"index\":" + std::to_string(i) + "}}");
    environment.insert(environment.end(), env.begin(), env.end());
    std::vector<std::string> argv_strings = {program};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : environment) envp.push_back(s.data());
    envp.push_back(nullptr);

    const std::string log = scratch_ + "/worker-" + std::to_string(i) + ".log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = -1;
    const int error =
        posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) throw std::runtime_error("posix_spawn " + program + " failed");
    pids_.push_back(pid);
  }
  results_.resize(pids_.size());
  done_.assign(pids_.size(), false);
}

void WorkerProcesses::Kill(int worker, int signal) { ::kill(pid(worker), signal); }

bool WorkerProcesses::Done(int worker) {
  const auto i = static_cast<size_t>(worker);
  if (done_[i]) return true;
  int status = 0;
  if (waitpid(pids_[i], &status, WNOHANG) != pids_[i]) return false;
  done_[i] = true;
  results_[i].exited = WIFEXITED(status);
  results_[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  results_[i].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return true;
}

std::vector<WorkerResult> WorkerProcesses::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < pids_.size(); ++i) all = Done(static_cast<int>(i)) && all;
    if (all || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (!done_[i]) {  // past the deadline: a hang, which the caller's assertions report
      ::kill(pids_[i], SIGKILL);
      waitpid(pids_[i], nullptr, 0);
      done_[i] = true;
    }
    std::ifstream in(scratch_ + "/worker-" + std::to_string(i) + ".log");
    std::stringstream text;
    text << in.rdbuf();
    results_[i].output = text.str();
  }
  return results_;
}

WorkerProcesses::~WorkerProcesses() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (done_[i]) continue;
    ::kill(pids_[i], SIGKILL);
    waitpid(pids_[i], nullptr, 0);
  }
  std::error_code error;
  std::filesystem::remove_all(scratch_, error);
}

}  // namespace chorus::test
