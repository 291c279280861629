// Starting one worker process.
#ifndef CHORUS_TOOLS_LAUNCH_SPAWN_H_
#define CHORUS_TOOLS_LAUNCH_SPAWN_H_

#include <sys/types.h>

namespace chorus::launch {

// Runs argv[0] (searched in PATH) with `argv` and `envp` in a new process group whose id is its
// pid, stdin from /dev/null, stdout and stderr to the given fds, no blocked signals and default
// signal dispositions. On Linux it gets SIGKILL if chorus-launch dies first, even from SIGKILL.
// Returns its pid, or -1 with `*error` set to the errno of the failed fork or exec.
pid_t SpawnWorker(char* const argv[], char* const envp[], int stdout_fd, int stderr_fd, int* error);

}  // namespace chorus::launch

#endif  // CHORUS_TOOLS_LAUNCH_SPAWN_H_
