// Names of data types, reduce operations and collective operations (the SDK's table,
// chorus/names.hpp), and their parsing.
#ifndef CHORUS_DTYPE_H_
#define CHORUS_DTYPE_H_

#include <chorus/plugin.h>

#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8".
const char* DtypeName(chorus_dtype dtype);
// Inverse of DtypeName; throws Error(INVALID_ARGUMENT) listing the valid names.
chorus_dtype ParseDtype(std::string_view name);
std::vector<chorus_dtype> AllDtypes();

// "sum", "prod", "min", "max", "mean".
const char* ReduceOpName(chorus_reduce_op op);
// "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"; "unknown operation".
const char* CollectiveOpName(chorus_collective_op op);
chorus_reduce_op ParseReduceOp(std::string_view name);

}  // namespace chorus

#endif  // CHORUS_DTYPE_H_
