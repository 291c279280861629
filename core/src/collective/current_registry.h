// The registry whose collectives the host's services (chorus_host.collectives) offer a plugin: the
// one the calling thread is selecting from or creating a communicator with, else the process-wide
// one. A plugin's score function and create run inside those calls on the same thread, so a
// communicator made from a test's own registry composes from that registry too. At operation
// time (routing among created collectives) no scope is open and the process-wide registry
// answers.
#ifndef CHORUS_CORE_COLLECTIVE_CURRENT_REGISTRY_H_
#define CHORUS_CORE_COLLECTIVE_CURRENT_REGISTRY_H_

#include <chorus/runtime/registry.h>

namespace chorus::internal {

class RegistryScope {
 public:
  explicit RegistryScope(const Registry& registry);
  ~RegistryScope();
  RegistryScope(const RegistryScope&) = delete;
  RegistryScope& operator=(const RegistryScope&) = delete;

 private:
  const Registry* previous_;
};

const Registry& CurrentRegistry();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_COLLECTIVE_CURRENT_REGISTRY_H_
