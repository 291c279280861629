// chorus dtypes and reduce ops as MPI datatypes and MPI_Ops. f16 and bf16 have no MPI type: they
// travel as 2-byte types of the plugin's own, reduced by user MPI_Ops that call the core's
// reduce_host kernel.
#ifndef CHORUS_MPI_DATATYPES_H_
#define CHORUS_MPI_DATATYPES_H_

#include <chorus/plugin.h>
#include <mpi.h>

namespace chorus::mpi {

// Creates the f16/bf16 types and user ops; call once MPI is initialised and the host is set
// (sdk::SetHost: the 16-bit ops reduce with its kernel). Throws sdk::Error.
void InitDatatypes();
MPI_Datatype DatatypeOf(chorus_dtype dtype);
MPI_Op OpOf(chorus_reduce_op op, chorus_dtype dtype);

}  // namespace chorus::mpi

#endif  // CHORUS_MPI_DATATYPES_H_
