// chorus::Error: the exception the core's C++ API throws. It carries the chorus_status of the
// failure so callers can tell a time-out or a lost peer from a bad argument.
#ifndef CHORUS_ERROR_H_
#define CHORUS_ERROR_H_

#include <chorus/plugin.h>

#include <stdexcept>
#include <string>

namespace chorus {

class Error : public std::runtime_error {
 public:
  Error(chorus_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  chorus_status status() const noexcept { return status_; }

 private:
  chorus_status status_;
};

// "OK", "INVALID_ARGUMENT", ...
const char* StatusName(chorus_status status);

}  // namespace chorus

#endif  // CHORUS_ERROR_H_
