#include "ring_chunked.h"

#include <gloo/algorithm.h>
#include <gloo/allreduce_ring_chunked.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "element_types.h"
#include "reduce_functions.h"

namespace chorus::gloo_plugin {
namespace {

// The two-pointer form gloo::ReductionFunction<T> holds: x[i] = x[i] op y[i].
template <typename T, chorus_reduce_op Op>
void ReduceInPlace(T* x, const T* y, size_t n) {
  Reduce<T, Op>(x, x, y, n);
}

constexpr ::gloo::ReductionType GlooReductionType(chorus_reduce_op op) {
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return ::gloo::SUM;
    case CHORUS_REDUCE_PROD:
      return ::gloo::PRODUCT;
    case CHORUS_REDUCE_MIN:
      return ::gloo::MIN;
    default:
      return ::gloo::MAX;
  }
}

// One static ReductionFunction per (T, Op): the algorithm keeps a pointer to it.
template <typename T, chorus_reduce_op Op>
const ::gloo::ReductionFunction<T>* ReductionFor() {
  static const ::gloo::ReductionFunction<T> function(GlooReductionType(Op), &ReduceInPlace<T, Op>);
  return &function;
}

}  // namespace

void RingChunkedAllReduce(const std::shared_ptr<::gloo::Context>& context, void* data, size_t count,
                          chorus_dtype dtype, chorus_reduce_op op) {
  VisitElementType(dtype, [&]<typename T>() {
    const ::gloo::ReductionFunction<T>* function =
        VisitReduceOp(op, []<chorus_reduce_op Op>() { return ReductionFor<T, Op>(); });
    constexpr size_t kMaxPiece = INT_MAX / sizeof(T);  // elements, so that bytes fit an int
    T* elements = static_cast<T*>(data);
    for (size_t offset = 0; offset < count; offset += kMaxPiece) {
      const int piece = static_cast<int>(std::min(kMaxPiece, count - offset));
      ::gloo::AllreduceRingChunked<T> algorithm(context, std::vector<T*>{elements + offset}, piece,
                                                function);
      try {
        algorithm.run();
      } catch (...) {
        // A peer failed mid-run, and the others may still be sending into this rank's buffers:
        // Gloo's device thread keeps writing a message it has begun into the caller's memory,
        // even after the algorithm's buffers are gone. Close every connection first, while the
        // algorithm (and the caller's buffer) still lives.
        context->closeConnections();
        throw;
      }
    }
  });
}

}  // namespace chorus::gloo_plugin
