// Elementwise kernels on host memory for every chorus dtype: the cpu devices' kernels and the
// host's reduce_host service. Throw chorus::sdk::Error on bad arguments.
#ifndef CHORUS_CORE_HOST_KERNELS_H_
#define CHORUS_CORE_HOST_KERNELS_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>

namespace chorus::internal {

// dst[i] = a[i] op b[i]; dst may equal a or b. op is SUM, PROD, MIN or MAX. Integer SUM and PROD
// wrap around on overflow (no undefined behaviour).
void ReduceHost(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                chorus_reduce_op op);

// data[i] /= divisor; integers round toward zero.
void DivideHost(void* data, size_t count, chorus_dtype dtype, uint64_t divisor);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_HOST_KERNELS_H_
