# The mpi plugin's time-out: rank 0 all-reduces alone with a 1 s time-out (mpi_plugin_test's
# DISABLED_TimeOutEndsTheJob); the job must end through MPI_Abort with exit status 124, saying
# why, well before the other rank's 60 s sleep ends.
# With -DTHREAD_LEVEL=single or serialized (CHORUS_MPI_THREAD_LEVEL) the watchdog may not call
# MPI: rank 0 exits with 124 and mpirun ends the job; status, message and time are held the same.
#   cmake -DMPIRUN=... -DTEST_BINARY=... [-DTHREAD_LEVEL=single] -P run_timeout_test.cmake
set(ended_by "with MPI_Abort")
set(pass_level)
if(THREAD_LEVEL)
  set(ENV{CHORUS_MPI_THREAD_LEVEL} "${THREAD_LEVEL}")
  set(pass_level -x CHORUS_MPI_THREAD_LEVEL)
  set(ended_by "by ending this process")
endif()
string(TIMESTAMP started "%s" UTC)
execute_process(
  COMMAND ${MPIRUN} -n 2 --oversubscribe --bind-to none ${pass_level} ${TEST_BINARY}
          --gtest_also_run_disabled_tests --gtest_filter=MpiJob.DISABLED_TimeOutEndsTheJob
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
string(TIMESTAMP ended "%s" UTC)
math(EXPR seconds "${ended} - ${started}")
message("exit status ${code} after ${seconds} s\nstdout:\n${out}\nstderr:\n${err}")
if(NOT code EQUAL 124)
  message(FATAL_ERROR "expected mpirun's exit status 124 (the plugin's MPI_Abort), got ${code}")
endif()
if(NOT "${out}${err}" MATCHES "mpi all_reduce \\(rank 0 of 2\\) did not finish within its time-out of 1000 ms")
  message(FATAL_ERROR "the message naming the call and its time-out is missing")
endif()
if(NOT "${out}${err}" MATCHES "the mpi plugin ends the job ${ended_by}")
  message(FATAL_ERROR "the message does not say the job ends ${ended_by}")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the job took ${seconds} s to end; the time-out is 1 s")
endif()
