// The core's logger (spdlog, named "chorus"). Its level comes from CHORUS_LOG_LEVEL: trace,
// debug, info, warn (default), error, off.
#ifndef CHORUS_LOGGING_H_
#define CHORUS_LOGGING_H_

#include <spdlog/spdlog.h>

namespace chorus {

spdlog::logger& Log();

}  // namespace chorus

#endif  // CHORUS_LOGGING_H_
