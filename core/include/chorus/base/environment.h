// Reading chorus's environment variables, with errors that name the variable.
#ifndef CHORUS_ENVIRONMENT_H_
#define CHORUS_ENVIRONMENT_H_

#include <optional>
#include <string>
#include <vector>

namespace chorus {

// The variable's value; nullopt when unset or empty.
std::optional<std::string> GetEnv(const char* name);

// A positive integer variable, or `fallback` when unset. Throws Error(INVALID_ARGUMENT) naming
// the variable when it is not an integer in [min, max].
long long GetEnvInteger(const char* name, long long fallback, long long min, long long max);

// Splits "a,b,,c" on `separator`, dropping empty parts and trimming spaces.
std::vector<std::string> SplitList(const std::string& text, char separator);

// The collective/cross-device time-out in seconds: CHORUS_TIMEOUT_SECONDS, default 300.
double DefaultTimeoutSeconds();

}  // namespace chorus

#endif  // CHORUS_ENVIRONMENT_H_
