// chorus-launch: runs copies of a program on this machine as the tasks of one cluster, each with
// its own TF_CONFIG, and prints their output line by line, prefixed with "[worker i] " (or
// "[chief 0] ", "[ps i] ", "[evaluator 0] " in a parameter-server job).
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ports.h"
#include "supervisor.h"

namespace {

// Workers inherit fds 0-2 through the pipes we set up; make sure none of ours is closed, so
// that no pipe we create lands on one of them.
void EnsureStandardFdsOpen() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) == -1) open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  }
}

}  // namespace

int main(int argc, char** argv) {
  EnsureStandardFdsOpen();
  const char* const kUsage =
      "usage: chorus-launch -n N [--keep-going] [--port-base P] [--timeout SECONDS] [--] program "
      "args...\n"
      "       chorus-launch --ps P --workers W [--evaluator] [--port-base P] [--timeout SECONDS] "
      "[--] program args...";
  CLI::App app{
      "chorus-launch: runs the tasks of a job on 127.0.0.1, each with TF_CONFIG naming the "
      "cluster and its task, and prefixes their output with \"[worker i] \" (\"[chief 0] \", "
      "\"[ps i] \", ...).\n"
      "-n N: N workers; the first that fails stops the others (those still running 1 s later "
      "get SIGTERM, then SIGKILL), and its exit code is the job's. With --keep-going a worker "
      "that fails or is killed does not stop the others: every worker runs to its end (or the "
      "time-out), each one's exit status is printed, and the first failure's exit code is the "
      "job's.\n"
      "--ps P --workers W: a parameter-server job of chief 0, W workers, P ps tasks (and with "
      "--evaluator one evaluator). A worker or ps that fails is reported and the others go on; "
      "the chief's exit code is the job's. After the chief exits the others get " +
      std::to_string(chorus::launch::kChiefGraceSeconds) +
      " s to exit, then SIGTERM, then SIGKILL."};
  app.footer(kUsage);
  int num_workers = 0;
  int num_ps = 0;
  int num_ps_workers = 0;
  bool evaluator = false;
  bool keep_going = false;
  std::optional<int> port_base;
  std::optional<double> timeout_seconds;
  CLI::Option* n_option =
      app.add_option("-n,--num-workers", num_workers, "number of workers of a multi-worker job")
          ->check(CLI::Range(1, 1024));
  CLI::Option* ps_option =
      app.add_option("--ps", num_ps, "number of ps tasks of a parameter-server job")
          ->check(CLI::Range(1, 1024));
  CLI::Option* workers_option =
      app.add_option("--workers", num_ps_workers, "number of workers of a parameter-server job")
          ->check(CLI::Range(1, 1024));
  CLI::Option* evaluator_option =
      app.add_flag("--evaluator", evaluator, "a parameter-server job also gets an evaluator task");
  CLI::Option* keep_going_option = app.add_flag(
      "--keep-going", keep_going,
      "with -n: a worker that fails or is killed does not stop the others; wait for every "
      "worker (within --timeout), print each one's exit status, and exit with the first "
      "failure's code (0 when all succeeded)");
  ps_option->needs(workers_option);
  workers_option->needs(ps_option);
  evaluator_option->needs(ps_option);
  keep_going_option->needs(n_option);
  n_option->excludes(ps_option)->excludes(workers_option)->excludes(evaluator_option);
  app.add_option("--port-base", port_base,
                 "task i listens on port P + i, counting chief, workers, ps, evaluator in that "
                 "order (default: free ports the system picks)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--timeout", timeout_seconds,
                 "stop every task after this many seconds and exit with code 124")
      ->check(CLI::PositiveNumber & CLI::Range(0.0, 1.0e9));
  // Everything from the program's name on belongs to the program, flags included.
  app.prefix_command();
  CLI11_PARSE(app, argc, argv);

  chorus::launch::LaunchOptions options;
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  } else if (!options.command.empty() && options.command.front().starts_with("-")) {
    std::cerr << "chorus-launch: unknown option '" << options.command.front()
              << "'; put '--' before the program if it starts with '-'\n";
    return 2;
  }
  if (n_option->count() == 0 && ps_option->count() == 0) {
    std::cerr << "chorus-launch: give -n N for a multi-worker job or --ps P --workers W for a "
                 "parameter-server job; "
              << kUsage << "\n";
    return 2;
  }
  if (options.command.empty()) {
    std::cerr << "chorus-launch: no program given; " << kUsage << "\n";
    return 2;
  }
  options.parameter_server = ps_option->count() > 0;
  const int num_tasks =
      options.parameter_server ? 1 + num_ps_workers + num_ps + (evaluator ? 1 : 0) : num_workers;
  const char* const tasks_word = options.parameter_server ? " tasks" : " workers";
  std::vector<int> ports;
  if (port_base) {
    if (*port_base + num_tasks - 1 > 65535) {
      std::cerr << "chorus-launch: --port-base " << *port_base << " leaves no room for "
                << num_tasks << tasks_word << " below port 65536; choose a lower port base\n";
      return 2;
    }
    for (int i = 0; i < num_tasks; ++i) ports.push_back(*port_base + i);
  } else {
    try {
      ports = chorus::launch::PickFreePorts(num_tasks);
    } catch (const std::runtime_error& e) {
      std::cerr << "chorus-launch: " << e.what() << "\n";
      return 1;
    }
  }
  if (options.parameter_server) {
    // TF_CONFIG's cluster lists chief, worker, ps and evaluator in this order.
    chorus::launch::AddTasks("chief", 1, ports, 0, &options.tasks);
    chorus::launch::AddTasks("worker", num_ps_workers, ports, 1, &options.tasks);
    chorus::launch::AddTasks("ps", num_ps, ports, 1 + num_ps_workers, &options.tasks);
    if (evaluator) {
      chorus::launch::AddTasks("evaluator", 1, ports, 1 + num_ps_workers + num_ps, &options.tasks);
    }
  } else {
    chorus::launch::AddTasks("worker", num_workers, ports, 0, &options.tasks);
  }
  options.timeout_seconds = timeout_seconds;
  options.keep_going = keep_going;
  return chorus::launch::RunTasks(options);
}
