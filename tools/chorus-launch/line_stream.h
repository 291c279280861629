// One child's stdout or stderr, read from a pipe and written out a whole line at a time with a
// prefix, so that lines of different workers never interleave mid-line.
#ifndef CHORUS_TOOLS_LAUNCH_LINE_STREAM_H_
#define CHORUS_TOOLS_LAUNCH_LINE_STREAM_H_

#include <string>

namespace chorus::launch {

// Writes all of `text` to `fd`, retrying on EINTR; gives up quietly when the reader is gone.
void WriteAll(int fd, const std::string& text);

class LineStream {
 public:
  // Takes ownership of `read_fd` (non-blocking); writes prefixed lines to `out_fd`.
  LineStream(int read_fd, int out_fd, std::string prefix);
  ~LineStream();
  LineStream(const LineStream&) = delete;
  LineStream& operator=(const LineStream&) = delete;

  int fd() const { return read_fd_; }
  bool open() const { return read_fd_ >= 0; }
  // Reads what the pipe holds and writes the complete lines; at end of file, writes the last
  // partial line and closes the pipe.
  void ReadAvailable();
  // Writes what is left (a partial line gets a newline) and closes the pipe.
  void Close();

 private:
  void WriteLines(bool flush_partial);

  int read_fd_;
  int out_fd_;
  std::string prefix_;
  std::string pending_;
};

}  // namespace chorus::launch

#endif  // CHORUS_TOOLS_LAUNCH_LINE_STREAM_H_
