#include "base/launcher_watch.h"

#include <chorus/base/environment.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "base/logging.h"

namespace chorus {
namespace {

// How long a worker may go on after the SIGTERM it sent itself.
constexpr auto kTermGrace = std::chrono::seconds(5);

// Blocks until the pipe's write end is closed in every process, that is until the launcher is
// gone. Waiting without a time-out is the point: the launcher may run for days.
void WaitForEndOfFile(int fd) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // cannot happen for a valid fd; treat as gone rather than spin
    char byte;
    const ssize_t got = ::read(fd, &byte, 1);
    if (got == 0) return;
    if (got < 0 && errno != EINTR && errno != EAGAIN) return;
    // The launcher never writes; a byte is ignored.
  }
}

void Watch(int fd, std::string launcher) {
  WaitForEndOfFile(fd);
  Log().error("the launcher ({}) died; stopping this worker", launcher);
  Log().flush();
  ::kill(::getpid(), SIGTERM);
  std::this_thread::sleep_for(kTermGrace);
  Log().error("the launcher ({}) died and this worker still runs {} s after SIGTERM; exiting",
              launcher, kTermGrace.count());
  Log().flush();
  std::_Exit(1);
}

}  // namespace

void WatchLauncher() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::optional<std::string> fd_text = GetEnv("CHORUS_LAUNCHER_FD");
    if (!fd_text) return;
    const long long fd = GetEnvInteger("CHORUS_LAUNCHER_FD", -1, 0, 1 << 30);
    struct stat info {};
    if (fd < 0 || ::fstat(static_cast<int>(fd), &info) != 0 || !S_ISFIFO(info.st_mode)) {
      Log().warn(
          "CHORUS_LAUNCHER_FD={} is not an open pipe, so this worker cannot notice its "
          "launcher's death; start workers with chorus-launch, which sets it, or unset it",
          *fd_text);
      return;
    }
    const std::string pid = GetEnv("CHORUS_LAUNCHER_PID").value_or("?");
    std::thread(Watch, static_cast<int>(fd), "chorus-launch, pid " + pid).detach();
  });
}

}  // namespace chorus
