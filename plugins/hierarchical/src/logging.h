// The host's logger, kept between init() and shutdown().
#ifndef CHORUS_PLUGINS_HIERARCHICAL_LOGGING_H_
#define CHORUS_PLUGINS_HIERARCHICAL_LOGGING_H_

#include <chorus/plugin.h>

#include <string>

namespace chorus::hierarchical {

// NULL clears it (shutdown).
void SetHost(const chorus_host* host);

// True when a line of `level` would be written; false without a host.
bool LogEnabled(chorus_log_level level);

void Log(chorus_log_level level, const std::string& message);

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_LOGGING_H_
