// Names of dtypes, reduce ops and collectives for messages.
#ifndef CHORUS_PLUGINS_RING_GRPC_NAMES_H_
#define CHORUS_PLUGINS_RING_GRPC_NAMES_H_

#include <cstdint>
#include <string>

namespace chorus::ring_grpc {

// "f32", ...; "dtype 42" for a value that is no chorus_dtype.
std::string DtypeName(uint32_t dtype);
// "SUM", ...
std::string ReduceOpName(uint32_t op);
// "all_reduce", ...
std::string CollectiveName(uint32_t op);

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_NAMES_H_
