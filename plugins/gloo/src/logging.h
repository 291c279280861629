// The host services this plugin uses, kept between init() and shutdown(): the logger and the
// core's abort flag.
#ifndef CHORUS_PLUGINS_GLOO_LOGGING_H_
#define CHORUS_PLUGINS_GLOO_LOGGING_H_

#include <chorus/plugin.h>

#include <string>

namespace chorus::gloo_plugin {

// NULL clears it (shutdown).
void SetHost(const chorus_host* host);

// True when a line of `level` would be written; false without a host.
bool LogEnabled(chorus_log_level level);

void Log(chorus_log_level level, const std::string& message);

// True once the core has asked every operation to stop (host->abort_requested).
bool HostAbortRequested();

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_LOGGING_H_
