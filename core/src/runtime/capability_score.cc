#include "runtime/capability_score.h"

namespace chorus::internal {

bool Serves(std::string_view declared, std::string_view wanted) {
  if (declared == "*" || declared == wanted) return true;
  const bool declared_host = declared == "host" || declared == "cpu";
  const bool wanted_host = wanted == "host" || wanted == "cpu";
  return declared_host && wanted_host;
}

std::optional<uint32_t> DeclaredScore(const chorus_capabilities* capabilities,
                                      const chorus_score_args& args) {
  chorus_score_args with_context = args;
  with_context.context = capabilities->context;
  try {
    return capabilities->score(&with_context);
  } catch (...) {
    return std::nullopt;
  }
}

uint32_t CapabilityScore(const chorus_capabilities* capabilities, const chorus_score_args& args) {
  if (capabilities == nullptr || args.op < 0 || args.op > CHORUS_OP_BARRIER ||
      (capabilities->ops & CHORUS_OP_BIT(args.op)) == 0) {
    return 0;
  }
  const std::string_view memory = args.memory != nullptr ? args.memory : "host";
  bool served = false;
  for (const char* const* m = capabilities->memory; m != nullptr && *m != nullptr; ++m) {
    served = served || Serves(*m, memory);
  }
  if (!served) return 0;
  if (capabilities->shape == CHORUS_SHAPE_ONE_HOST && args.hosts != 1) return 0;
  if (capabilities->shape == CHORUS_SHAPE_UNIFORM && args.ranks_per_host <= 0) return 0;
  const std::optional<uint32_t> declared = DeclaredScore(capabilities, args);
  if (!declared) return 0;
  return *declared <= CHORUS_SCORE_MAX || *declared == CHORUS_SCORE_UNKNOWN ? *declared : 0;
}

uint32_t PairProduct(uint32_t a, uint32_t b) {
  if (a == 0 || b == 0) return 0;
  if (a == CHORUS_SCORE_UNKNOWN || b == CHORUS_SCORE_UNKNOWN) return CHORUS_SCORE_UNKNOWN;
  return static_cast<uint32_t>(uint64_t{a} * b / CHORUS_SCORE_MAX);
}

}  // namespace chorus::internal
