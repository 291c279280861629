// chorus-info: every plugin found, its path, ABI version, what it provides, the devices seen,
// which backend the current variables select, and why each rejected candidate was rejected.
#include <chorus/base/error.h>
#include <chorus/plugin.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "report.h"

int main(int argc, char** argv) {
  CLI::App app{"chorus-info: the plugins, devices and backends chorus sees here"};
  bool plugins_only = false;
  app.add_flag("--plugins-only", plugins_only, "list plugins and rejected candidates only");
  CLI11_PARSE(app, argc, argv);

  std::cout << "chorus core ABI " << CHORUS_ABI_MAJOR << "." << CHORUS_ABI_MINOR << "\n";
  try {
    chorus::Registry& registry = chorus::Registry::Global();
    chorus::info::PrintSearchPath(registry, std::cout);
    chorus::info::PrintPlugins(registry, std::cout);
    if (!plugins_only) {
      chorus::info::PrintDevices(registry, std::cout);
      chorus::info::PrintSelection(registry, std::cout);
    }
    chorus::info::PrintRejected(registry, std::cout);
  } catch (const chorus::Error& e) {
    std::cerr << "chorus-info: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
