// Elementwise reductions for every (dtype, reduce op) pair, in the form Gloo calls them.
#ifndef CHORUS_PLUGINS_GLOO_REDUCE_FUNCTIONS_H_
#define CHORUS_PLUGINS_GLOO_REDUCE_FUNCTIONS_H_

#include <chorus/plugin.h>
#include <gloo/math.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstddef>
#include <type_traits>

#include "element_types.h"

namespace chorus::gloo_plugin {

// out[i] = a[i] op b[i] for i < count; out may equal a or b. The signature of
// gloo::AllreduceOptions::Func (and of gloo::sum<T> and friends).
using ReduceFunction = void (*)(void* out, const void* a, const void* b, size_t count);

// Gloo's own gloo::sum/product/min/max<T> for f32, f64, i32, i64, u8, i8 and f16 (as
// gloo::float16, whose arithmetic rounds through float); for bf16, which Gloo lacks, each element
// is widened to float, reduced, and rounded back to nearest even. Integer SUM and PROD wrap.
template <typename T, chorus_reduce_op Op>
void Reduce(void* out, const void* a, const void* b, size_t count) {
  if constexpr (std::is_same_v<T, Bfloat16>) {
    auto* o = static_cast<Bfloat16*>(out);
    const auto* x = static_cast<const Bfloat16*>(a);
    const auto* y = static_cast<const Bfloat16*>(b);
    for (size_t i = 0; i < count; ++i) {
      const float u = sdk::Bf16ToFloat(x[i].bits), v = sdk::Bf16ToFloat(y[i].bits);
      float r;
      if constexpr (Op == CHORUS_REDUCE_SUM) {
        r = u + v;
      } else if constexpr (Op == CHORUS_REDUCE_PROD) {
        r = u * v;
      } else if constexpr (Op == CHORUS_REDUCE_MIN) {
        r = std::min(u, v);
      } else {
        r = std::max(u, v);
      }
      o[i].bits = sdk::FloatToBf16(r);
    }
  } else if constexpr (Op == CHORUS_REDUCE_SUM) {
    ::gloo::sum<T>(out, a, b, count);
  } else if constexpr (Op == CHORUS_REDUCE_PROD) {
    ::gloo::product<T>(out, a, b, count);
  } else if constexpr (Op == CHORUS_REDUCE_MIN) {
    ::gloo::min<T>(out, a, b, count);
  } else {
    static_assert(Op == CHORUS_REDUCE_MAX, "MEAN is resolved by the core");
    ::gloo::max<T>(out, a, b, count);
  }
}

// Calls visit.template operator()<Op>() for a reduce op a plugin receives (SUM, PROD, MIN, MAX).
// MEAN is CHORUS_UNSUPPORTED (the core resolves it); anything else CHORUS_INVALID_ARGUMENT.
template <typename Visitor>
decltype(auto) VisitReduceOp(chorus_reduce_op op, Visitor&& visit) {
  sdk::RequireReduceOp(op, "gloo");
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return visit.template operator()<CHORUS_REDUCE_SUM>();
    case CHORUS_REDUCE_PROD:
      return visit.template operator()<CHORUS_REDUCE_PROD>();
    case CHORUS_REDUCE_MIN:
      return visit.template operator()<CHORUS_REDUCE_MIN>();
    default:
      return visit.template operator()<CHORUS_REDUCE_MAX>();
  }
}

// The function for (dtype, op); errors as VisitElementType and VisitReduceOp.
ReduceFunction FindReduceFunction(chorus_dtype dtype, chorus_reduce_op op);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_REDUCE_FUNCTIONS_H_
