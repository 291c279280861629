// Exit statuses that chorus itself gives a process, so that a launcher or a scheduler can tell
// them from a program's own.
#ifndef CHORUS_BASE_EXIT_STATUS_H_
#define CHORUS_BASE_EXIT_STATUS_H_

namespace chorus {

// The watchdog ended the process: a call into a plugin (a collective, its create, the opening of
// a plugin file) did not return within its time-out, nor after the abort that followed. The
// process printed what did not return ("[chorus watchdog] ...") before it ended. 70 is sysexits'
// EX_SOFTWARE.
inline constexpr int kWatchdogExitStatus = 70;

}  // namespace chorus

#endif  // CHORUS_BASE_EXIT_STATUS_H_
