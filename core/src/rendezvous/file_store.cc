// The file store: one file per key in a directory every worker sees. A value is written to a
// temporary file and rename()d into place, so readers see all of it or nothing; Add holds an
// flock() on a lock file of its key; waits poll the directory.
#include <chorus/base/error.h>
#include <chorus/rendezvous/rendezvous.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include "base/fnv1a.h"
#include "base/socket_util.h"
#include "rendezvous/kv_store_internal.h"

namespace chorus {
namespace {

using std::chrono::milliseconds;

// How long Add waits for another writer's lock on its key (held for microseconds normally).
constexpr milliseconds kLockTimeout{60000};
constexpr std::chrono::microseconds kMaxLockPause{2000};
// Escaped names are cut here (plus a hash of the key), well below NAME_MAX (255).
constexpr size_t kMaxNameBytes = 200;

// A file name for `key`: letters, digits, '-', '_' and '.' stay (but not a leading '.', which
// marks the store's own temporary and lock files); every other byte becomes %XX.
std::string FileNameOf(const std::string& key) {
  if (key.empty()) return "%";
  static const char kHex[] = "0123456789ABCDEF";
  std::string name;
  for (size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || (c == '.' && i > 0);
    if (plain) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  if (name.size() <= kMaxNameBytes) return name;
  // Too long for a file name: keep a readable head and make it unique with a hash (FNV-1a, the
  // same in every process).
  const uint64_t hash = internal::Fnv1a64(key);
  std::string tail = "~";
  for (int shift = 60; shift >= 0; shift -= 4) tail += kHex[(hash >> shift) & 15];
  return name.substr(0, kMaxNameBytes - tail.size()) + tail;
}

// Sleeps a little longer each time, 10 ms up to 50 ms, never past `deadline`.
class Poller {
 public:
  explicit Poller(Clock::time_point deadline) : deadline_(deadline) {}
  // False once the deadline has passed.
  bool Sleep() {
    const auto now = Clock::now();
    if (now >= deadline_) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause_, deadline_ - now));
    pause_ = std::min(pause_ * 3 / 2, milliseconds(50));
    return true;
  }

 private:
  Clock::time_point deadline_;
  milliseconds pause_{10};
};

class FileStore : public KvStore {
 public:
  explicit FileStore(std::filesystem::path directory) : directory_(std::move(directory)) {}

  void Set(const std::string& key, const Bytes& value) override { WriteAtomically(key, value); }

  Bytes Get(const std::string& key, milliseconds timeout) override {
    Poller poller(DeadlineAfter(timeout));
    for (;;) {
      if (std::optional<Bytes> value = ReadIfPresent(key)) return std::move(*value);
      if (!poller.Sleep()) ThrowStoreTimeout(*this, {key}, timeout);
    }
  }

  void Wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    Poller poller(DeadlineAfter(timeout));
    size_t present = 0;  // keys[0, present) exist; a key, once set, is not expected to vanish
    for (;;) {
      while (present < keys.size() && Check(keys[present])) ++present;
      if (present == keys.size()) return;
      if (!poller.Sleep()) ThrowStoreTimeout(*this, keys, timeout);
    }
  }

  int64_t Add(const std::string& key, int64_t delta) override {
    const UniqueFd lock = LockKey(key);
    int64_t value = 0;
    if (std::optional<Bytes> old = ReadIfPresent(key)) {
      value = ParseStoredCounter(*old, key, Describe());
    }
    if (__builtin_add_overflow(value, delta, &value)) {
      throw Error(CHORUS_INVALID_ARGUMENT, "rendezvous: Add on '" + key + "' overflows");
    }
    WriteAtomically(key, ToBytes(std::to_string(value)));
    return value;
  }

  bool Check(const std::string& key) override {
    struct stat info {};
    if (::stat(PathOf(key).c_str(), &info) == 0) return true;
    if (errno == ENOENT) return false;
    Fail("cannot look up", key, errno);
  }

  bool Remove(const std::string& key) override {
    if (::unlink(PathOf(key).c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    Fail("cannot remove", key, errno);
  }

  std::string Describe() const override { return "file store " + directory_.string(); }

 private:
  std::string PathOf(const std::string& key) const { return directory_ / FileNameOf(key); }

  [[noreturn]] void Fail(const std::string& what, const std::string& key, int err) const {
    throw Error(CHORUS_INTERNAL,
                "rendezvous: the " + Describe() + " " + what + " '" + key + "': " + ErrnoText(err));
  }

  std::optional<Bytes> ReadIfPresent(const std::string& key) const {
    UniqueFd fd(::open(PathOf(key).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return std::nullopt;
      Fail("cannot open", key, errno);
    }
    Bytes value;
    uint8_t buffer[64 * 1024];
    for (;;) {
      const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
      if (n > 0) {
        value.insert(value.end(), buffer, buffer + n);
      } else if (n == 0) {
        return value;
      } else if (errno != EINTR) {
        Fail("cannot read", key, errno);
      }
    }
  }

  void WriteAtomically(const std::string& key, const Bytes& value) const {
    std::string temp = directory_ / ".tmp-XXXXXX";
    UniqueFd fd(::mkstemp(temp.data()));
    if (!fd.valid()) Fail("cannot create a temporary file for", key, errno);
    // mkstemp makes the file private (0600); other workers may run as other users.
    (void)::fchmod(fd.get(), 0644);
    size_t written = 0;
    while (written < value.size()) {
      const ssize_t n = ::write(fd.get(), value.data() + written, value.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : EIO;
        ::unlink(temp.c_str());
        Fail("cannot write", key, err);
      }
      written += static_cast<size_t>(n);
    }
    if (::close(fd.release()) != 0 && errno != EINTR) {
      const int err = errno;
      ::unlink(temp.c_str());
      Fail("cannot write", key, err);
    }
    if (::rename(temp.c_str(), PathOf(key).c_str()) != 0) {
      const int err = errno;
      ::unlink(temp.c_str());
      Fail("cannot write", key, err);
    }
  }

  // An exclusive flock on the key's lock file, released when the returned fd closes. Each call
  // opens its own file description, so it excludes other threads of this process too.
  UniqueFd LockKey(const std::string& key) const {
    const std::string path = directory_ / (".lock-" + FileNameOf(key));
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) Fail("cannot open the lock file of", key, errno);
    const Clock::time_point deadline = DeadlineAfter(kLockTimeout);
    // Non-blocking attempts, so that a stuck holder cannot hold us past the deadline. Holders
    // keep the lock for microseconds, so the pauses start short.
    for (std::chrono::microseconds pause(50);; pause = std::min(pause * 2, kMaxLockPause)) {
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return fd;
      if (errno != EWOULDBLOCK && errno != EINTR) Fail("cannot lock", key, errno);
      if (Clock::now() >= deadline) {
        throw Error(CHORUS_TIMEOUT, "rendezvous: the " + Describe() + " could not lock '" + key +
                                        "' for Add within " + std::to_string(kLockTimeout.count()) +
                                        " ms; another process holds " + path);
      }
      std::this_thread::sleep_for(pause);
    }
  }

  const std::filesystem::path directory_;
};

}  // namespace

std::shared_ptr<KvStore> MakeFileStore(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error || !std::filesystem::is_directory(directory, error)) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "rendezvous: cannot use '" + directory +
                    "' for a file store: " + (error ? error.message() : "not a directory"));
  }
  return std::make_shared<FileStore>(directory);
}

}  // namespace chorus
