#include "base/logging.h"

#include <chorus/base/environment.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdio>
#include <mutex>

namespace chorus {
namespace {

// An unknown level is reported on stderr and the default used: throwing from the logger would
// take down whatever was being logged.
spdlog::level::level_enum LevelFromEnvironment() {
  auto value = GetEnv("CHORUS_LOG_LEVEL");
  if (!value) return spdlog::level::warn;
  static const std::pair<const char*, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"off", spdlog::level::off}};
  for (const auto& [name, level] : kLevels) {
    if (*value == name) return level;
  }
  std::fprintf(stderr,
               "chorus: CHORUS_LOG_LEVEL='%s' is not a level; use one of trace, debug, info, "
               "warn, error, off. Using warn.\n",
               value->c_str());
  return spdlog::level::warn;
}

std::shared_ptr<spdlog::logger> MakeLogger() {
  auto logger = std::make_shared<spdlog::logger>(
      "chorus", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern("[chorus %L %H:%M:%S.%e] %v");
  logger->set_level(LevelFromEnvironment());
  return logger;
}

}  // namespace

spdlog::logger& Log() {
  // Never destroyed: threads that outlive main (the watchdog's, a plugin's) may still log while
  // the process exits.
  static auto* logger = new std::shared_ptr<spdlog::logger>(MakeLogger());
  return **logger;
}

}  // namespace chorus
