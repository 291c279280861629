#include "base/variable_file.h"

#include <chorus/base/error.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace chorus {

std::string ReadVariableFile(const std::string& variable, const std::string& path,
                             const std::string& fix) {
  const std::string named = variable + "=" + path;
  const auto unreadable = [&](int error) {
    return Error(CHORUS_INVALID_ARGUMENT,
                 named + " cannot be read: " + std::strerror(error) + "; " + fix);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw unreadable(errno);
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    ::close(fd);
    throw Error(CHORUS_INVALID_ARGUMENT, named + " is a directory, not a file; " + fix);
  }
  std::string content;
  char buffer[65536];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw unreadable(error);
    }
    content.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return content;
}

}  // namespace chorus
