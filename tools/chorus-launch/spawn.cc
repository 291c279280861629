#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <initializer_list>

namespace chorus::launch {
namespace {

// In the child between fork and exec: only async-signal-safe calls. Reports a failure's errno
// through `error_fd` (close-on-exec, so a successful exec reports nothing).
[[noreturn]] void ExecChild(char* const argv[], char* const envp[], int stdout_fd, int stderr_fd,
                            pid_t parent, int error_fd) {
  setpgid(0, 0);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // chorus-launch died before the line above
#else
  (void)parent;
#endif
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::signal(signal, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(stderr_fd, STDERR_FILENO) < 0) {
    const int e = errno;
    [[maybe_unused]] ssize_t n = write(error_fd, &e, sizeof(e));
    _exit(127);
  }
  execvpe(argv[0], argv, envp);
  const int e = errno;
  [[maybe_unused]] ssize_t n = write(error_fd, &e, sizeof(e));
  _exit(127);
}

}  // namespace

pid_t SpawnWorker(char* const argv[], char* const envp[], int stdout_fd, int stderr_fd,
                  int* error) {
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    *error = errno;
    return -1;
  }
  // Signals stay blocked until the child has reset its handlers: ours must never run in it.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) ExecChild(argv, envp, stdout_fd, stderr_fd, parent, error_pipe[1]);
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  close(error_pipe[1]);
  if (pid < 0) {
    close(error_pipe[0]);
    *error = fork_errno;
    return -1;
  }
  setpgid(pid, pid);  // also here, so the group exists before we might signal it
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(error_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n == sizeof(exec_errno)) {
    waitpid(pid, nullptr, 0);
    *error = exec_errno;
    return -1;
  }
  return pid;
}

}  // namespace chorus::launch
