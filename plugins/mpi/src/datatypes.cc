#include "datatypes.h"

#include <chorus/plugin_sdk.hpp>
#include <mutex>

#include "mpi_errors.h"

namespace chorus::mpi {
namespace {

std::once_flag g_once;
MPI_Datatype g_f16 = MPI_DATATYPE_NULL;
MPI_Datatype g_bf16 = MPI_DATATYPE_NULL;
MPI_Op g_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

// inout[i] = in[i] op inout[i] for the 16-bit float types, through the host's kernel.
template <chorus_reduce_op Op>
void HalfOp(void* in, void* inout, int* len, MPI_Datatype* type) {
  try {
    sdk::ReduceOnHost(inout, inout, in, static_cast<size_t>(*len),
                      *type == g_bf16 ? CHORUS_BF16 : CHORUS_F16, Op);
  } catch (const sdk::Error&) {
    MPI_Abort(MPI_COMM_WORLD, 70);  // a user op cannot report errors; this cannot happen
  }
}

}  // namespace

void InitDatatypes() {
  std::call_once(g_once, [] {
    Check(MPI_Type_contiguous(2, MPI_BYTE, &g_f16), "MPI_Type_contiguous (f16)");
    Check(MPI_Type_commit(&g_f16), "MPI_Type_commit (f16)");
    Check(MPI_Type_contiguous(2, MPI_BYTE, &g_bf16), "MPI_Type_contiguous (bf16)");
    Check(MPI_Type_commit(&g_bf16), "MPI_Type_commit (bf16)");
    Check(MPI_Op_create(&HalfOp<CHORUS_REDUCE_SUM>, 1, &g_ops[0]), "MPI_Op_create");
    Check(MPI_Op_create(&HalfOp<CHORUS_REDUCE_PROD>, 1, &g_ops[1]), "MPI_Op_create");
    Check(MPI_Op_create(&HalfOp<CHORUS_REDUCE_MIN>, 1, &g_ops[2]), "MPI_Op_create");
    Check(MPI_Op_create(&HalfOp<CHORUS_REDUCE_MAX>, 1, &g_ops[3]), "MPI_Op_create");
  });
}

MPI_Datatype DatatypeOf(chorus_dtype dtype) {
  switch (dtype) {
    case CHORUS_F32:
      return MPI_FLOAT;
    case CHORUS_F64:
      return MPI_DOUBLE;
    case CHORUS_F16:
      return g_f16;
    case CHORUS_BF16:
      return g_bf16;
    case CHORUS_I32:
      return MPI_INT32_T;
    case CHORUS_I64:
      return MPI_INT64_T;
    case CHORUS_U8:
      return MPI_UINT8_T;
    case CHORUS_I8:
      return MPI_INT8_T;
    default:
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "mpi: unknown dtype ", static_cast<int>(dtype));
  }
}

MPI_Op OpOf(chorus_reduce_op op, chorus_dtype dtype) {
  sdk::RequireReduceOp(op, "mpi");
  if (dtype == CHORUS_F16 || dtype == CHORUS_BF16) return g_ops[op];
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return MPI_SUM;
    case CHORUS_REDUCE_PROD:
      return MPI_PROD;
    case CHORUS_REDUCE_MIN:
      return MPI_MIN;
    default:
      return MPI_MAX;
  }
}

}  // namespace chorus::mpi
