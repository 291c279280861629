// The chorus_host handed to plugins: one per plugin, so log lines name the plugin.
#ifndef CHORUS_CORE_HOST_H_
#define CHORUS_CORE_HOST_H_

#include <chorus/plugin.h>

#include <memory>
#include <string>

namespace chorus::internal {

class PluginHost {
 public:
  explicit PluginHost(std::string plugin_name);
  const chorus_host* host() const { return &host_; }
  const std::string& plugin_name() const { return plugin_name_; }

 private:
  std::string plugin_name_;
  chorus_host host_{};
};

bool AbortRequested();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_HOST_H_
