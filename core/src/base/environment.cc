#include <chorus/base/environment.h>
#include <chorus/base/error.h>

#include <cerrno>
#include <cstdlib>

namespace chorus {

std::optional<std::string> GetEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

long long GetEnvInteger(const char* name, long long fallback, long long min, long long max) {
  auto value = GetEnv(name);
  if (!value) return fallback;
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(value->c_str(), &end, 10);
  if (errno != 0 || end == value->c_str() || *end != '\0' || parsed < min || parsed > max) {
    throw Error(CHORUS_INVALID_ARGUMENT, std::string(name) + "='" + *value +
                                             "' is not an integer in [" + std::to_string(min) +
                                             ", " + std::to_string(max) + "]; fix or unset it");
  }
  return parsed;
}

std::vector<std::string> SplitList(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(start, end - start);
    const size_t first = part.find_first_not_of(" \t");
    const size_t last = part.find_last_not_of(" \t");
    if (first != std::string::npos) parts.push_back(part.substr(first, last - first + 1));
    start = end + 1;
  }
  return parts;
}

double DefaultTimeoutSeconds() {
  auto value = GetEnv("CHORUS_TIMEOUT_SECONDS");
  if (!value) return 300.0;
  char* end = nullptr;
  errno = 0;
  double seconds = std::strtod(value->c_str(), &end);
  if (errno != 0 || end == value->c_str() || *end != '\0' || !(seconds > 0) ||
      seconds > 7 * 24 * 3600.0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_TIMEOUT_SECONDS='" + *value +
                                             "' is not a number of seconds > 0 (at most a "
                                             "week); fix or unset it");
  }
  return seconds;
}

}  // namespace chorus
