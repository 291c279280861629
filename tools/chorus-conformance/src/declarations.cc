#include "declarations.h"

#include <string_view>

namespace chorus::conformance::internal {
namespace {

// Whether a capabilities' memory list names one of `wanted` (or "*", any memory). The list is
// bounded as the core's loader bounds it.
bool ListsMemory(const chorus_capabilities& capabilities,
                 std::initializer_list<std::string_view> wanted) {
  constexpr size_t kMaxMemoryKinds = 64;
  if (capabilities.memory == nullptr) return false;
  for (size_t i = 0; i < kMaxMemoryKinds && capabilities.memory[i] != nullptr; ++i) {
    const std::string_view memory = capabilities.memory[i];
    if (memory == "*") return true;
    for (std::string_view w : wanted) {
      if (memory == w) return true;
    }
  }
  return false;
}

// The table's capabilities when it has a usable set (1.1), else NULL.
template <typename Api>
const chorus_capabilities* CapabilitiesOf(const Api& api) {
  if (api.struct_size < CHORUS_STRUCT_SIZE(Api, capabilities)) return nullptr;
  const chorus_capabilities* capabilities = api.capabilities;
  if (capabilities == nullptr ||
      capabilities->struct_size < CHORUS_STRUCT_SIZE(chorus_capabilities, score)) {
    return nullptr;
  }
  return capabilities;
}

bool Declared(const chorus_capabilities& capabilities, chorus_collective_op op,
              std::initializer_list<std::string_view> memory) {
  return (capabilities.ops & CHORUS_OP_BIT(op)) != 0 && ListsMemory(capabilities, memory);
}

}  // namespace

bool DeclaresOnHost(const chorus_collective_api& api, chorus_collective_op op) {
  if (const chorus_capabilities* capabilities = CapabilitiesOf(api)) {
    return Declared(*capabilities, op, {"host"});
  }
  switch (op) {  // ABI 1.0: every function it has
    case CHORUS_OP_ALL_REDUCE:
      return api.all_reduce != nullptr;
    case CHORUS_OP_BROADCAST:
      return api.broadcast != nullptr;
    case CHORUS_OP_ALL_GATHER:
      return api.all_gather != nullptr;
    case CHORUS_OP_REDUCE_SCATTER:
      return api.reduce_scatter != nullptr;
    case CHORUS_OP_BARRIER:
      return api.barrier != nullptr;
    default:
      return false;
  }
}

bool DeclaresOnCpuDevices(const chorus_cross_device_ops_api& api, chorus_collective_op op) {
  // The cpu enumerator's memory is host memory: "host" and its platform "cpu" both name it.
  if (const chorus_capabilities* capabilities = CapabilitiesOf(api)) {
    return Declared(*capabilities, op, {"host", "cpu"});
  }
  switch (op) {
    case CHORUS_OP_ALL_REDUCE:
      return api.reduce != nullptr;
    case CHORUS_OP_BROADCAST:
      return api.broadcast != nullptr;
    case CHORUS_OP_ALL_GATHER:
      return api.all_gather != nullptr;
    default:
      return false;
  }
}

bool DeclaresOnMemory(const chorus_cross_device_ops_api& api, chorus_collective_op op,
                      std::string_view platform) {
  const chorus_capabilities* capabilities = CapabilitiesOf(api);
  return capabilities != nullptr && Declared(*capabilities, op, {platform});
}

bool DeclaresAnyOnCpuDevices(const chorus_cross_device_ops_api& api) {
  for (chorus_collective_op op :
       {CHORUS_OP_ALL_REDUCE, CHORUS_OP_BROADCAST, CHORUS_OP_ALL_GATHER}) {
    if (DeclaresOnCpuDevices(api, op)) return true;
  }
  return false;
}

bool Declares(const chorus_algorithm_api& api, chorus_collective_op op) {
  return (api.supported_ops & CHORUS_OP_BIT(op)) != 0;
}

}  // namespace chorus::conformance::internal
