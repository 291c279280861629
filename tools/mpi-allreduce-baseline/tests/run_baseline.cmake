# Runs mpi-allreduce-baseline under `mpirun -n RANKS` and checks what it printed.
#   cmake -DMPIRUN=... -DRANKS=2 -DBASELINE=... [-DBAD_INPUT=ON] -P run_baseline.cmake
# Default: a sweep 4K..1M by 4 (5 sizes) must exit 0 with one row per size, every #wrong 0 (the
# program compares every element of its last iterations with the exact sums).
# BAD_INPUT: -b larger than -e must exit 2 saying so. Run as an MPI singleton (no mpirun): under
# mpirun a process that exits non-zero after MPI_Finalize made this loaded VM's mpirun take 2-5 s
# to end, once over 60 s.
set(mpirun ${MPIRUN} -n ${RANKS} --oversubscribe --bind-to none)
if(BAD_INPUT)
  execute_process(COMMAND ${BASELINE} -b 8M -e 4K
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 50)
  if(NOT code EQUAL 2 OR NOT err MATCHES "-b is larger than -e")
    message(FATAL_ERROR "-b 8M -e 4K: expected exit code 2 and a message naming -b and -e; got "
                        "${code}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  return()
endif()
execute_process(COMMAND ${mpirun} ${BASELINE} -b 4K -e 1M -f 4 -w 1 -i 3 -R 2
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
message("${out}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "exit code ${code} (1: wrong results)\nstderr:\n${err}")
endif()
# A row: name, size, count, type, redop, root, then time algbw busbw #wrong twice.
set(number "[0-9]+\\.[0-9]+")
set(figures " +${number} +${number} +${number} +0")
foreach(bytes 4096 16384 65536 262144 1048576)
  math(EXPR count "${bytes} / 4")
  if(NOT out MATCHES "\n  MPI_Allreduce +${bytes} +${count} +f32 +sum +-1${figures}${figures}\n")
    message(FATAL_ERROR "no row of ${bytes} bytes with #wrong 0 (out of place and in place)")
  endif()
endforeach()
if(NOT out MATCHES "# mpi-allreduce-baseline: ${RANKS} processes")
  message(FATAL_ERROR "the header does not name ${RANKS} processes")
endif()
