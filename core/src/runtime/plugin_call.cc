#include "runtime/plugin_call.h"

#include "base/logging.h"

namespace chorus::internal {

std::string PluginWords(const PluginLibrary& library) {
  return "plugin " + library.name() + " (" + library.path() + ")";
}

std::string ThrewAcrossTheAbi(const std::string& call, const char* what) {
  return call +
         (what != nullptr ? " threw a C++ exception across the C ABI: " + std::string(what)
                          : std::string(" threw an exception (not a std::exception) across the "
                                        "C ABI")) +
         ". A plugin must catch everything and return a chorus_status with its message in "
         "last_error (the SDK's chorus::sdk::Guard does); report it to the plugin's vendor";
}

void ReportSignalsRestored(const std::string& call, const std::string& signals) {
  Log().info(
      "{} changed how this process handles {} (a library it uses installs handlers of its own); "
      "chorus put the previous handling back, so these signals keep their meaning",
      call, signals);
}

}  // namespace chorus::internal
