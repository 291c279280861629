#include "collective/current_registry.h"

namespace chorus::internal {
namespace {

thread_local const Registry* t_current = nullptr;

}  // namespace

RegistryScope::RegistryScope(const Registry& registry) : previous_(t_current) {
  t_current = &registry;
}

RegistryScope::~RegistryScope() { t_current = previous_; }

const Registry& CurrentRegistry() { return t_current != nullptr ? *t_current : Registry::Global(); }

}  // namespace chorus::internal
