// What every signal does in this process (its disposition), taken before a plugin runs code and
// put back after it, so that loading or creating a plugin never changes how the process reacts to
// a signal. A library a plugin pulls in may install handlers of its own from a constructor:
// libfabric 1.17's psm provider (libinfinipath) installs handlers for SIGINT, SIGTERM, SIGSEGV
// and others that call exit(1), which turned a scheduler's SIGTERM into static destructors
// running under live threads (a crash) and an exit status of 1 instead of the signal.
#ifndef CHORUS_BASE_SIGNAL_DISPOSITIONS_H_
#define CHORUS_BASE_SIGNAL_DISPOSITIONS_H_

#include <signal.h>

#include <array>
#include <string>

namespace chorus::internal {

class SignalDispositions {
 public:
  // The dispositions now.
  static SignalDispositions Take();

  // Puts back every disposition that differs from this snapshot and returns the signals it put
  // back ("SIGINT, SIGTERM"), or "" when nothing changed. One change is kept: SIGPIPE set to
  // ignored, which socket libraries (Gloo, gRPC) need so that a write to a closed connection
  // fails instead of killing the process.
  // A disposition whose handler is `own_handler` (the caller's, installed since the snapshot) is
  // put back without being reported.
  std::string RestoreChanged(void (*own_handler)(int, siginfo_t*, void*) = nullptr) const;

 private:
  std::array<struct sigaction, NSIG> actions_{};
  std::array<bool, NSIG> valid_{};
};

}  // namespace chorus::internal

#endif  // CHORUS_BASE_SIGNAL_DISPOSITIONS_H_
