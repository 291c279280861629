// The C++ element type behind each chorus_dtype, for Gloo's typed templates.
#ifndef CHORUS_PLUGINS_GLOO_ELEMENT_TYPES_H_
#define CHORUS_PLUGINS_GLOO_ELEMENT_TYPES_H_

#include <chorus/plugin.h>
#include <gloo/types.h>  // gloo::float16

#include <chorus/plugin_sdk.hpp>
#include <cstdint>

namespace chorus::gloo_plugin {

// bfloat16 as stored: the upper half of an f32. Gloo has no bfloat16 type, so reductions of it
// go through float (reduce_functions.h).
struct Bfloat16 {
  uint16_t bits;
};
static_assert(sizeof(Bfloat16) == 2 && sizeof(::gloo::float16) == 2);

// Returns visit.template operator()<T>() for the element type T of `dtype`: float, double,
// gloo::float16 (f16), Bfloat16 (bf16), int32_t, int64_t, uint8_t, int8_t. An unknown dtype is
// CHORUS_INVALID_ARGUMENT.
template <typename Visitor>
decltype(auto) VisitElementType(chorus_dtype dtype, Visitor&& visit) {
  switch (dtype) {
    case CHORUS_F32:
      return visit.template operator()<float>();
    case CHORUS_F64:
      return visit.template operator()<double>();
    case CHORUS_F16:
      return visit.template operator()<::gloo::float16>();
    case CHORUS_BF16:
      return visit.template operator()<Bfloat16>();
    case CHORUS_I32:
      return visit.template operator()<int32_t>();
    case CHORUS_I64:
      return visit.template operator()<int64_t>();
    case CHORUS_U8:
      return visit.template operator()<uint8_t>();
    case CHORUS_I8:
      return visit.template operator()<int8_t>();
    default:
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "gloo: unknown dtype ", static_cast<int>(dtype));
  }
}

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_ELEMENT_TYPES_H_
