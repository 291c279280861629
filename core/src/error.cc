#include <chorus/error.h>

namespace chorus {

const char* StatusName(chorus_status status) {
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
