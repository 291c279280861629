#include "base/signal_dispositions.h"

#include <string.h>

namespace chorus::internal {
namespace {

// The kernel's SA_RESTORER (asm/signal.h; glibc's <signal.h> does not define it).
#ifdef SA_RESTORER
constexpr int kRestorer = SA_RESTORER;
#else
constexpr int kRestorer = 0x04000000;
#endif

bool SameAction(const struct sigaction& a, const struct sigaction& b) {
  // sa_handler and sa_sigaction share storage; SA_SIGINFO says which one is meant. The C library
  // adds SA_RESTORER to whatever it installs, so a default put back reads with a flag the
  // process's first default did not have; for the default and "ignore" the flags mean nothing.
  const bool plain_a =
      !(a.sa_flags & SA_SIGINFO) && (a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN);
  const bool plain_b =
      !(b.sa_flags & SA_SIGINFO) && (b.sa_handler == SIG_DFL || b.sa_handler == SIG_IGN);
  if (plain_a || plain_b) return plain_a && plain_b && a.sa_handler == b.sa_handler;
  return a.sa_handler == b.sa_handler && (a.sa_flags & ~kRestorer) == (b.sa_flags & ~kRestorer);
}

std::string SignalName(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(signal);
}

}  // namespace

SignalDispositions SignalDispositions::Take() {
  SignalDispositions snapshot;
  for (int signal = 1; signal < NSIG; ++signal) {
    if (signal == SIGKILL || signal == SIGSTOP) continue;
    snapshot.valid_[signal] = ::sigaction(signal, nullptr, &snapshot.actions_[signal]) == 0;
  }
  return snapshot;
}

std::string SignalDispositions::RestoreChanged(void (*own_handler)(int, siginfo_t*, void*)) const {
  std::string restored;
  for (int signal = 1; signal < NSIG; ++signal) {
    if (!valid_[signal]) continue;
    struct sigaction now {};
    if (::sigaction(signal, nullptr, &now) != 0 || SameAction(now, actions_[signal])) continue;
    if (signal == SIGPIPE && now.sa_handler == SIG_IGN && !(now.sa_flags & SA_SIGINFO)) continue;
    const bool own =
        own_handler != nullptr && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == own_handler;
    if (::sigaction(signal, &actions_[signal], nullptr) != 0 || own) continue;
    restored += (restored.empty() ? "" : ", ") + SignalName(signal);
  }
  return restored;
}

}  // namespace chorus::internal
