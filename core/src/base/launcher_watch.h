// Stopping a worker whose launcher died. chorus-launch gives every worker the read end of a pipe
// whose write end only chorus-launch holds, its number in CHORUS_LAUNCHER_FD (and chorus-launch's
// pid in CHORUS_LAUNCHER_PID). When chorus-launch dies, even from SIGKILL, the pipe reads end of
// file. PR_SET_PDEATHSIG reaches only chorus-launch's direct children; this reaches a worker
// started through a wrapper script too.
#ifndef CHORUS_LAUNCHER_WATCH_H_
#define CHORUS_LAUNCHER_WATCH_H_

namespace chorus {

// Once per process, when CHORUS_LAUNCHER_FD names a pipe: starts a thread that waits for its end
// of file, then logs "the launcher (chorus-launch, pid N) died; stopping this worker" and sends
// this process SIGTERM; a process still running 5 s later (one that ignores or handles SIGTERM
// and goes on) exits with code 1. Does nothing without the variable.
void WatchLauncher();

}  // namespace chorus

#endif  // CHORUS_LAUNCHER_WATCH_H_
