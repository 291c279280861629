#include "line_stream.h"

#include <errno.h>
#include <unistd.h>

namespace chorus::launch {
namespace {

// A line longer than this is written in pieces, each with the prefix, so memory stays bounded.
constexpr size_t kMaxLine = 1 << 20;

}  // namespace

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // e.g. EPIPE: nobody reads our output any more
    done += static_cast<size_t>(n);
  }
}

LineStream::LineStream(int read_fd, int out_fd, std::string prefix)
    : read_fd_(read_fd), out_fd_(out_fd), prefix_(std::move(prefix)) {}

LineStream::~LineStream() { Close(); }

void LineStream::ReadAvailable() {
  if (read_fd_ < 0) return;
  // One read per call, so that a chatty worker cannot starve the others' output.
  char buffer[65536];
  ssize_t n;
  do {
    n = read(read_fd_, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    Close();  // end of file, or an error that ends the stream the same way
    return;
  }
  pending_.append(buffer, static_cast<size_t>(n));
  WriteLines(/*flush_partial=*/false);
}

void LineStream::Close() {
  if (read_fd_ < 0) return;
  WriteLines(/*flush_partial=*/true);
  close(read_fd_);
  read_fd_ = -1;
}

void LineStream::WriteLines(bool flush_partial) {
  std::string out;
  size_t start = 0;
  for (;;) {
    const size_t newline = pending_.find('\n', start);
    size_t end = newline;
    if (newline == std::string::npos) {
      const bool long_line = pending_.size() - start >= kMaxLine;
      if (start == pending_.size() || !(flush_partial || long_line)) break;
      end = long_line ? start + kMaxLine : pending_.size();
    }
    out += prefix_;
    out.append(pending_, start, end - start);
    out += '\n';
    start = newline == end ? end + 1 : end;
  }
  pending_.erase(0, start);
  // One write per batch: whole lines only, so another worker's batch cannot split one.
  if (!out.empty()) WriteAll(out_fd_, out);
}

}  // namespace chorus::launch
