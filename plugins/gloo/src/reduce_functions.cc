#include "reduce_functions.h"

namespace chorus::gloo_plugin {

ReduceFunction FindReduceFunction(chorus_dtype dtype, chorus_reduce_op op) {
  return VisitElementType(dtype, [&]<typename T>() {
    return VisitReduceOp(op,
                         []<chorus_reduce_op Op>() -> ReduceFunction { return &Reduce<T, Op>; });
  });
}

}  // namespace chorus::gloo_plugin
