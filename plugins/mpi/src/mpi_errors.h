// MPI return codes as chorus errors.
#ifndef CHORUS_MPI_ERRORS_H_
#define CHORUS_MPI_ERRORS_H_

#include <string>

namespace chorus::mpi {

// MPI_Error_string's text for `code`.
std::string ErrorText(int code);

// Throws sdk::Error(CHORUS_INTERNAL, "mpi: <what> failed: <MPI's text>") unless `code` is
// MPI_SUCCESS.
void Check(int code, const char* what);

}  // namespace chorus::mpi

#endif  // CHORUS_MPI_ERRORS_H_
