#include "ps_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "chorus-launch/ports.h"

extern char** environ;

namespace chorus::test {

PsCluster::PsCluster(int num_ps, int num_workers, const std::vector<std::string>& env) : env_(env) {
  char pattern[] = "/tmp/chorus_ps_cluster_XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  scratch_ = pattern;
  const std::vector<int> ports = launch::PickFreePorts(1 + num_ps + num_workers);
  size_t next = 0;
  const auto address = [&] { return "127.0.0.1:" + std::to_string(ports[next++]); };
  spec_["chief"] = {address()};
  for (int i = 0; i < num_ps; ++i) spec_["ps"].push_back(address());
  for (int i = 0; i < num_workers; ++i) spec_["worker"].push_back(address());
  cluster_json_ = "{";
  for (const auto& [job, addresses] : spec_) {
    if (cluster_json_.size() > 1) cluster_json_ += ",";
    cluster_json_ += "\"" + job + "\":[";
    for (size_t i = 0; i < addresses.size(); ++i) {
      cluster_json_ += (i ? ",\"" : "\"") + addresses[i] + "\"";
    }
    cluster_json_ += "]";
  }
  cluster_json_ += "}";
  for (int i = 0; i < num_ps; ++i) tasks_.push_back({"ps", i});
  for (int i = 0; i < num_workers; ++i) tasks_.push_back({"worker", i});
  for (Task& task : tasks_) Start(task);
}

PsCluster::~PsCluster() {
  for (Task& task : tasks_) {
    if (task.reaped) continue;
    ::kill(task.pid, SIGKILL);
    waitpid(task.pid, nullptr, 0);
  }
  std::error_code error;
  std::filesystem::remove_all(scratch_, error);
}

std::unique_ptr<ClusterResolver> PsCluster::resolver() const {
  return std::make_unique<SimpleClusterResolver>(spec_, "chief", 0);
}

std::string PsCluster::tf_config(const std::string& type, int index) const {
  return "{\"cluster\":" + cluster_json_ + ",\"task\":{\"type\":\"" + type +
         "\",\"index\":" + std::to_string(index) + "}}";
}

PsCluster::Task& PsCluster::Find(const std::string& type, int index) {
  for (Task& task : tasks_) {
    if (task.type == type && task.index == index) return task;
  }
  throw std::runtime_error("no task " + type + " " + std::to_string(index));
}

const PsCluster::Task& PsCluster::Find(const std::string& type, int index) const {
  return const_cast<PsCluster*>(this)->Find(type, index);
}

std::string PsCluster::LogPath(const Task& task) const {
  const std::string name =
      task.log_name.empty() ? task.type + "-" + std::to_string(task.index) : task.log_name;
  return scratch_ + "/" + name + ".log";
}

void PsCluster::Start(Task& task) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("TF_CONFIG=", 0) != 0) environment.push_back(*e);
  }
  environment.push_back("TF_CONFIG=" + tf_config(task.type, task.index));
  environment.insert(environment.end(), env_.begin(), env_.end());
  environment.insert(environment.end(), task.env.begin(), task.env.end());
  std::string program = CHORUS_PS_TEST_TASK;
  std::vector<char*> argv = {program.data(), nullptr};
  std::vector<char*> envp;
  for (auto& s : environment) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string log = LogPath(task);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::runtime_error("posix_spawn " + program + " failed");
  task.pid = pid;
  task.reaped = false;
  task.starts += 1;
}

void PsCluster::Kill(const std::string& type, int index, int signal) {
  Task& task = Find(type, index);
  if (task.reaped) return;
  ::kill(task.pid, signal);
  if (signal == SIGKILL) {
    waitpid(task.pid, &task.status, 0);
    task.reaped = true;
  }
}

void PsCluster::Restart(const std::string& type, int index) {
  Task& task = Find(type, index);
  if (!task.reaped) {
    ::kill(task.pid, SIGKILL);
    waitpid(task.pid, &task.status, 0);
    task.reaped = true;
  }
  Start(task);
}

bool PsCluster::Exited(const std::string& type, int index, int* exit_code) {
  Task& task = Find(type, index);
  if (!task.reaped && waitpid(task.pid, &task.status, WNOHANG) == task.pid) task.reaped = true;
  if (task.reaped && exit_code != nullptr) {
    *exit_code = WIFEXITED(task.status) ? WEXITSTATUS(task.status) : 128 + WTERMSIG(task.status);
  }
  return task.reaped;
}

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string PsCluster::Output(const std::string& type, int index) const {
  return ReadFile(LogPath(Find(type, index)));
}

bool PsCluster::WaitAll(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    bool all = true;
    for (const Task& task : tasks_) all = Exited(task.type, task.index) && all;
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int PsCluster::RunProcessAs(const std::string& type, int index, int timeout_ms, std::string* output,
                            const std::vector<std::string>& env) {
  Task duplicate{type, index};
  duplicate.log_name = type + "-" + std::to_string(index) + "-another";
  duplicate.env = env;
  std::filesystem::remove(LogPath(duplicate));  // this run's output only
  Start(duplicate);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  pid_t reaped = 0;
  while ((reaped = waitpid(duplicate.pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (reaped != duplicate.pid) {
    ::kill(duplicate.pid, SIGKILL);
    waitpid(duplicate.pid, nullptr, 0);
  }
  *output = ReadFile(LogPath(duplicate));
  if (reaped != duplicate.pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace chorus::test
