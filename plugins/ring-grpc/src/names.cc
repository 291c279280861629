#include "names.h"

#include <chorus/plugin.h>

namespace chorus::ring_grpc {

std::string DtypeName(uint32_t dtype) {
  switch (dtype) {
    case CHORUS_F32:
      return "f32";
    case CHORUS_F64:
      return "f64";
    case CHORUS_F16:
      return "f16";
    case CHORUS_BF16:
      return "bf16";
    case CHORUS_I32:
      return "i32";
    case CHORUS_I64:
      return "i64";
    case CHORUS_U8:
      return "u8";
    case CHORUS_I8:
      return "i8";
    default:
      return "dtype " + std::to_string(dtype);
  }
}

std::string ReduceOpName(uint32_t op) {
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return "SUM";
    case CHORUS_REDUCE_PROD:
      return "PROD";
    case CHORUS_REDUCE_MIN:
      return "MIN";
    case CHORUS_REDUCE_MAX:
      return "MAX";
    case CHORUS_REDUCE_MEAN:
      return "MEAN";
    default:
      return "reduce op " + std::to_string(op);
  }
}

std::string CollectiveName(uint32_t op) {
  switch (op) {
    case CHORUS_OP_ALL_REDUCE:
      return "all_reduce";
    case CHORUS_OP_BROADCAST:
      return "broadcast";
    case CHORUS_OP_ALL_GATHER:
      return "all_gather";
    case CHORUS_OP_REDUCE_SCATTER:
      return "reduce_scatter";
    case CHORUS_OP_BARRIER:
      return "barrier";
    default:
      return "operation " + std::to_string(op);
  }
}

}  // namespace chorus::ring_grpc
