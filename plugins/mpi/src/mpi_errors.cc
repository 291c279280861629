#include "mpi_errors.h"

#include <mpi.h>

#include <chorus/plugin_sdk.hpp>

namespace chorus::mpi {

std::string ErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return text;
}

void Check(int code, const char* what) {
  if (code != MPI_SUCCESS) sdk::Fail(CHORUS_INTERNAL, "mpi: ", what, " failed: ", ErrorText(code));
}

}  // namespace chorus::mpi
