// The chorus_host handed to plugins: one per plugin, so log lines name the plugin and the
// composition services know who asks.
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

// The composition services (chorus_host.collectives): the collective layer registers them when
// libchorus loads, since the runtime layer does not include the layers above it. Hosts made
// before that (none in practice) offer none.
void RegisterHostCollectives(const chorus_host_collectives* table);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_HOST_H_
