// A worker for chorus-launch's tests. It reads its TF_CONFIG through chorus's resolver, then runs
// the actions its arguments name, in order:
//   print              "index=I size=N address=A tf_config=T" on stdout, a line on stderr
//   print-task         "task=TYPE I address=A ps_cluster=ok tf_config=T" (ps_cluster: what
//                      ValidateParameterServerCluster says) on stdout
//   lines=N:LENGTH     N numbered lines of LENGTH characters, each written in several pieces
//   partial            a last line without a newline
//   pid-dir=DIR        write its pid to DIR/worker<I>.pid
//   grandchild         fork a process that sleeps forever; its pid goes to DIR/grandchild<I>.pid
//   wait-files=K       wait (up to 20 s) until DIR holds K files, e.g. every worker's pid file
//   wait-gone=NAME     wait (up to 20 s) until the process of DIR/NAME.pid has ended
//   ignore-term        ignore SIGTERM
//   exit=CODE@I        worker I exits with CODE
//   crash=SIGNAL@I     worker I kills itself with SIGNAL
//   sleep=SECONDS      sleep; "sleep=forever" never returns
// An action followed by "@TYPE" or "@TYPE:I" (e.g. "sleep=forever@ps", "exit=1@worker:1") is run
// only by the tasks it names; pid files are named after the task, e.g. DIR/ps0.pid.
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>

namespace {

// "CODE@I" -> CODE when I is this worker's index; "CODE" (its task chosen by a selector) -> CODE.
bool ForMe(const std::string& spec, int index, int* value) {
  const size_t at = spec.find('@');
  if (at != std::string::npos && std::stoi(spec.substr(at + 1)) != index) return false;
  *value = std::stoi(spec.substr(0, at));
  return true;
}

// Whether "TYPE" or "TYPE:I" names this task.
bool Selects(const std::string& selector, const chorus::ClusterResolver& cluster) {
  const size_t colon = selector.find(':');
  if (selector.substr(0, colon) != cluster.task_type()) return false;
  return colon == std::string::npos || std::stoi(selector.substr(colon + 1)) == cluster.task_id();
}

void WritePid(const std::string& dir, const std::string& name, pid_t pid) {
  const std::string path = dir + "/" + name;
  std::ofstream(path + ".tmp") << pid << "\n";
  std::filesystem::rename(path + ".tmp", path);  // readers never see a half-written file
}

void WriteInPieces(const std::string& line) {
  const size_t piece = std::max<size_t>(1, line.size() / 3);
  for (size_t start = 0; start < line.size(); start += piece) {
    fwrite(line.data() + start, 1, std::min(piece, line.size() - start), stdout);
    fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const chorus::TFConfigClusterResolver cluster;
  const int index = cluster.task_id();
  std::string pid_dir = ".";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // "ACTION@TYPE[:I]": a selector starts with a letter; "exit=3@1" keeps its index form.
    if (const size_t at = arg.rfind('@');
        at != std::string::npos && at + 1 < arg.size() && std::isalpha(arg[at + 1])) {
      if (!Selects(arg.substr(at + 1), cluster)) continue;
      arg.resize(at);
    }
    const size_t equals = arg.find('=');
    const std::string action = arg.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : arg.substr(equals + 1);
    int number = 0;
    if (action == "print") {
      std::cout << "index=" << index << " size=" << cluster.num_workers()
                << " address=" << cluster.AddressOf(index) << " tf_config=" << getenv("TF_CONFIG")
                << std::endl;
      std::cerr << "stderr from worker " << index << std::endl;
    } else if (action == "print-task") {
      std::string ps_cluster = "ok";
      try {
        chorus::ValidateParameterServerCluster(cluster);
      } catch (const std::exception& e) {
        ps_cluster = e.what();
      }
      std::cout << "task=" << cluster.task_name()
                << " address=" << cluster.cluster_spec().at(cluster.task_type()).at(index)
                << " ps_cluster=" << ps_cluster << " tf_config=" << getenv("TF_CONFIG")
                << std::endl;
    } else if (action == "lines") {
      const int count = std::stoi(value);
      const size_t length = std::stoul(value.substr(value.find(':') + 1));
      for (int k = 0; k < count; ++k) {
        std::string line = "w" + std::to_string(index) + " l" + std::to_string(k) + " ";
        line.resize(length, static_cast<char>('a' + index % 26));
        WriteInPieces(line + "\n");
      }
    } else if (action == "partial") {
      std::cout << "no newline at end" << std::flush;
    } else if (action == "pid-dir") {
      pid_dir = value;
      WritePid(pid_dir, cluster.task_type() + std::to_string(index) + ".pid", getpid());
    } else if (action == "grandchild") {
      const pid_t child = fork();
      if (child == 0) {
        for (;;) pause();
      }
      WritePid(pid_dir, "grandchild-" + cluster.task_type() + std::to_string(index) + ".pid",
               child);
    } else if (action == "wait-files") {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      for (;;) {
        int files = 0;
        for (const auto& entry : std::filesystem::directory_iterator(pid_dir)) {
          files += entry.path().extension() == ".pid";
        }
        if (files >= std::stoi(value) || std::chrono::steady_clock::now() > give_up) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } else if (action == "wait-gone") {
      std::ifstream file(pid_dir + "/" + value + ".pid");
      pid_t pid = 0;
      file >> pid;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (pid > 0 && std::chrono::steady_clock::now() < give_up) {
        // Ended: gone, or a zombie its parent has not reaped yet.
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        const size_t paren = text.rfind(')');
        if (text.empty() ||
            (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z')) {
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } else if (action == "ignore-term") {
      signal(SIGTERM, SIG_IGN);
    } else if (action == "exit" && ForMe(value, index, &number)) {
      std::exit(number);
    } else if (action == "crash" && ForMe(value, index, &number)) {
      const rlimit no_core = {0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
      signal(number, SIG_DFL);
      raise(number);
    } else if (action == "sleep") {
      if (value == "forever") {
        for (;;) pause();
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(std::stod(value)));
    } else if (action != "exit" && action != "crash") {
      std::cerr << "launch_probe: unknown action '" << arg << "'" << std::endl;
      return 2;
    }
  }
  return 0;
}
