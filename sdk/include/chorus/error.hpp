// chorus::Error: the one C++ error type of chorus. The core's C++ API throws it; inside a plugin
// the SDK's helpers throw it and turn it into a chorus_status and a last_error() message at the
// ABI (sdk::Guard), because no C++ type crosses plugin.h. Header-only, C++17.
#ifndef CHORUS_ERROR_HPP_
#define CHORUS_ERROR_HPP_

#include <chorus/plugin.h>

#include <stdexcept>
#include <string>

namespace chorus {

class Error : public std::runtime_error {
 public:
  Error(chorus_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  // What failed, as the ABI says it: a time-out, a lost peer, a bad argument, ...
  chorus_status status() const noexcept { return status_; }

 private:
  chorus_status status_;
};

// "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_STATUS" for a value plugin.h does not define.
inline const char* StatusName(chorus_status status) {
  switch (status) {
    case CHORUS_OK:
      return "OK";
    case CHORUS_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case CHORUS_UNSUPPORTED:
      return "UNSUPPORTED";
    case CHORUS_TIMEOUT:
      return "TIMEOUT";
    case CHORUS_PEER_LOST:
      return "PEER_LOST";
    case CHORUS_ABORTED:
      return "ABORTED";
    case CHORUS_OUT_OF_MEMORY:
      return "OUT_OF_MEMORY";
    case CHORUS_INTERNAL:
      return "INTERNAL";
    case CHORUS_NOT_FOUND:
      return "NOT_FOUND";
    case CHORUS_UNAVAILABLE:
      return "UNAVAILABLE";
    default:
      break;
  }
  return "UNKNOWN_STATUS";
}

}  // namespace chorus

#endif  // CHORUS_ERROR_HPP_
