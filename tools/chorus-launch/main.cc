// chorus-launch: runs N copies of a program on this machine as the workers of one cluster, each
// with its own TF_CONFIG, and prints their output line by line, prefixed with "[worker i] ".
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <stdexcept>

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
  CLI::App app{
      "chorus-launch: runs N workers of a program on 127.0.0.1, each with TF_CONFIG naming the "
      "cluster and its index; stops all when one fails"};
  app.footer("usage: chorus-launch -n N [--port-base P] [--timeout SECONDS] [--] program args...");
  int num_workers = 0;
  std::optional<int> port_base;
  std::optional<double> timeout_seconds;
  app.add_option("-n,--num-workers", num_workers, "number of workers")
      ->required()
      ->check(CLI::Range(1, 1024));
  app.add_option("--port-base", port_base,
                 "worker i listens on port P + i (default: free ports the system picks)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--timeout", timeout_seconds,
                 "stop every worker after this many seconds and exit with code 124")
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
  if (options.command.empty()) {
    std::cerr << "chorus-launch: no program given; usage: chorus-launch -n N [--port-base P] "
                 "[--timeout SECONDS] [--] program args...\n";
    return 2;
  }
  if (port_base) {
    if (*port_base + num_workers - 1 > 65535) {
      std::cerr << "chorus-launch: --port-base " << *port_base << " leaves no room for "
                << num_workers << " workers below port 65536; choose a lower port base\n";
      return 2;
    }
    for (int i = 0; i < num_workers; ++i) options.ports.push_back(*port_base + i);
  } else {
    try {
      options.ports = chorus::launch::PickFreePorts(num_workers);
    } catch (const std::runtime_error& e) {
      std::cerr << "chorus-launch: " << e.what() << "\n";
      return 1;
    }
  }
  options.timeout_seconds = timeout_seconds;
  return chorus::launch::RunWorkers(options);
}
