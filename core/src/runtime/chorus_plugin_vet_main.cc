// chorus-plugin-vet FILE: opens a plugin file and calls its entry point, then exits 0, so that
// a job can learn in a process of its own whether the file crashes or hangs when opened
// (runtime/plugin_vetting.h). Not meant to be run by hand.
#include <cstdio>
#include <cstdlib>

#include "runtime/plugin_vetting.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: chorus-plugin-vet PLUGIN_FILE (run by libchorus, not by hand)\n");
    return 64;
  }
  // _Exit: neither the plugin's static destructors nor a leak check at exit belong to the verdict.
  std::_Exit(chorus::internal::VetPluginInThisProcess(argv[1]));
}
