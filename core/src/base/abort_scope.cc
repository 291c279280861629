#include "base/abort_scope.h"

namespace chorus::internal {
namespace {

std::atomic<bool> g_process_abort{false};
thread_local const AbortScope* t_current = nullptr;

}  // namespace

AbortScope::AbortScope(const AbortFlag& flag) : flag_(flag), parent_(t_current) {
  t_current = this;
}

AbortScope::~AbortScope() { t_current = parent_; }

bool AbortRequested() {
  if (g_process_abort.load(std::memory_order_acquire)) return true;
  for (const AbortScope* scope = t_current; scope != nullptr; scope = scope->parent_) {
    if (scope->flag_.raised()) return true;
  }
  return false;
}

void RaiseProcessAbort() { g_process_abort.store(true, std::memory_order_release); }

}  // namespace chorus::internal
