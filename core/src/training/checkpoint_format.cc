// Encoding, decoding and atomic writing of checkpoint files; the format is in
// checkpoint_format.h.
#include "training/checkpoint_format.h"

#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "base/hmac_sha256.h"

namespace chorus::internal {
namespace {

constexpr size_t kChecksumBytes = 8;
constexpr uint32_t kMaxRank = 64;

[[noreturn]] void Malformed(const std::string& path, const std::string& what) {
  throw Error(CHORUS_INVALID_ARGUMENT, "checkpoint '" + path + "': " + what);
}

// ---- encoding ------------------------------------------------------------------------------

template <typename T>
void PutLittleEndian(std::vector<uint8_t>& out, T value) {
  const auto bits = static_cast<std::make_unsigned_t<T>>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(bits >> (8 * i)));
}

void PutEntry(std::vector<uint8_t>& out, const CheckpointEntry& entry) {
  PutLittleEndian(out, static_cast<uint32_t>(entry.key.size()));
  out.insert(out.end(), entry.key.begin(), entry.key.end());
  PutLittleEndian(out, static_cast<uint32_t>(entry.dtype));
  PutLittleEndian(out, static_cast<uint32_t>(entry.shape.size()));
  for (int64_t dim : entry.shape) PutLittleEndian(out, dim);
  PutLittleEndian(out, static_cast<uint64_t>(entry.data.size()));
  out.insert(out.end(), entry.data.begin(), entry.data.end());
}

// ---- decoding ------------------------------------------------------------------------------

// Reads fields in order; reports running out of bytes instead of throwing, so that a caller can
// tell a truncated file from a corrupt one.
class Reader {
 public:
  Reader(const std::vector<uint8_t>& file, size_t offset) : file_(file), offset_(offset) {}

  template <typename T>
  bool Get(T& value) {
    if (!Has(sizeof(T))) return false;
    std::make_unsigned_t<T> bits = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      bits |= static_cast<std::make_unsigned_t<T>>(file_[offset_ + i]) << (8 * i);
    }
    value = static_cast<T>(bits);
    offset_ += sizeof(T);
    return true;
  }
  bool GetBytes(uint64_t count, const uint8_t*& begin) {
    if (!Has(count)) return false;
    begin = file_.data() + offset_;
    offset_ += static_cast<size_t>(count);
    return true;
  }
  bool Has(uint64_t count) const { return count <= file_.size() - offset_; }
  size_t offset() const { return offset_; }
  size_t remaining() const { return file_.size() - offset_; }

 private:
  const std::vector<uint8_t>& file_;
  size_t offset_;
};

// Why an entry could not be read: the file ran out, or a field is impossible.
struct EntryProblem {
  bool truncated;
  std::string what;
};

std::optional<EntryProblem> CheckSizes(const CheckpointEntry& entry, uint64_t nbytes) {
  const size_t element = chorus_dtype_size(entry.dtype);
  if (element == 0) {
    return EntryProblem{false, "unknown dtype " + std::to_string(entry.dtype)};
  }
  uint64_t elements = 1;
  for (int64_t dim : entry.shape) {
    if (dim < 0) return EntryProblem{false, "negative dimension " + std::to_string(dim)};
    if (dim != 0 && elements > nbytes / static_cast<uint64_t>(dim)) {
      return EntryProblem{false, "shape " + ShapeString(entry.shape) + " does not match " +
                                     std::to_string(nbytes) + " bytes"};
    }
    elements *= static_cast<uint64_t>(dim);
  }
  if (elements * element != nbytes) {
    return EntryProblem{false, std::string(DtypeName(entry.dtype)) + ShapeString(entry.shape) +
                                   " needs " + std::to_string(elements * element) +
                                   " bytes, the entry has " + std::to_string(nbytes)};
  }
  return std::nullopt;
}

std::optional<EntryProblem> ReadShape(Reader& reader, CheckpointEntry& entry) {
  uint32_t dtype = 0, rank = 0;
  if (!reader.Get(dtype) || !reader.Get(rank)) return EntryProblem{true, "dtype and rank"};
  entry.dtype = static_cast<chorus_dtype>(dtype);
  if (rank > kMaxRank) return EntryProblem{false, "rank " + std::to_string(rank)};
  entry.shape.assign(rank, 0);
  for (int64_t& dim : entry.shape) {
    if (!reader.Get(dim)) return EntryProblem{true, "dimensions"};
  }
  return std::nullopt;
}

std::optional<EntryProblem> ReadEntry(Reader& reader, CheckpointEntry& entry) {
  uint32_t key_length = 0;
  const uint8_t* bytes = nullptr;
  if (!reader.Get(key_length) || !reader.GetBytes(key_length, bytes)) {
    return EntryProblem{true, "key"};
  }
  entry.key.assign(reinterpret_cast<const char*>(bytes), key_length);
  if (auto problem = ReadShape(reader, entry)) return problem;
  uint64_t nbytes = 0;
  if (!reader.Get(nbytes)) return EntryProblem{true, "byte count"};
  if (auto problem = CheckSizes(entry, nbytes)) return problem;
  if (!reader.GetBytes(nbytes, bytes)) return EntryProblem{true, "data"};
  entry.data.assign(bytes, bytes + nbytes);
  return std::nullopt;
}

struct Parsed {
  std::vector<CheckpointEntry> entries;
  std::optional<EntryProblem> problem;  // unset: every entry read
  size_t trailing = 0;                  // bytes after the last entry
};

Parsed ParseEntries(const std::vector<uint8_t>& file) {
  Parsed parsed;
  Reader reader(file, kCheckpointMagic.size());
  uint64_t count = 0;
  if (!reader.Get(count)) {
    parsed.problem = EntryProblem{true, "the entry count"};
    return parsed;
  }
  for (uint64_t i = 0; i < count; ++i) {
    CheckpointEntry entry;
    if (auto problem = ReadEntry(reader, entry)) {
      problem->what = "entry " + std::to_string(i + 1) + " of " + std::to_string(count) +
                      (entry.key.empty() ? "" : " ('" + entry.key + "')") +
                      (problem->truncated ? ", in its " : ": ") + problem->what;
      parsed.problem = problem;
      return parsed;
    }
    parsed.entries.push_back(std::move(entry));
  }
  parsed.trailing = reader.remaining();
  return parsed;
}

void CheckMagic(const std::vector<uint8_t>& file, const std::string& path) {
  const size_t n = std::min(file.size(), kCheckpointMagic.size());
  if (!std::equal(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n),
                  kCheckpointMagic.begin())) {
    Malformed(path, "not a chorus checkpoint (it does not begin with \"CHORUSCKPT1\")");
  }
  if (n < kCheckpointMagic.size()) {
    Malformed(path,
              "truncated: " + std::to_string(file.size()) + " bytes, shorter than the header");
  }
}

// The stored checksum matches the contents, or the file is too short to hold one.
bool ChecksumMatches(const std::vector<uint8_t>& file, uint64_t& stored, uint64_t& computed) {
  if (file.size() < kCheckpointMagic.size() + kChecksumBytes) return false;
  const size_t body = file.size() - kChecksumBytes;
  Reader reader(file, body);
  reader.Get(stored);
  computed = Fnv1a64(file.data(), body);
  return stored == computed;
}

std::string Hex(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The checksum does not match: say whether the file is cut short or its bytes changed.
[[noreturn]] void ExplainMismatch(const std::vector<uint8_t>& file, const std::string& path,
                                  const Parsed& parsed, uint64_t stored, uint64_t computed) {
  const std::string size = " (" + std::to_string(file.size()) + " bytes)";
  if (parsed.problem && parsed.problem->truncated) {
    Malformed(path, "truncated" + size + ": the file ends inside " + parsed.problem->what);
  }
  if (!parsed.problem && parsed.trailing < kChecksumBytes) {
    Malformed(path, "truncated" + size + ": the file ends inside the checksum");
  }
  Malformed(path, "checksum mismatch" + size + ": stored " + Hex(stored) + ", computed " +
                      Hex(computed) + "; the file is corrupt");
}

// ---- files ---------------------------------------------------------------------------------

[[noreturn]] void FileError(chorus_status status, const std::string& what, const std::string& path,
                            int error) {
  throw Error(status, "checkpoint: cannot " + what + " '" + path + "': " + std::strerror(error));
}

void WriteAll(int fd, const std::vector<uint8_t>& bytes, const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) FileError(CHORUS_INTERNAL, "write", path, errno);
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) FileError(CHORUS_INTERNAL, "sync", path, errno);
}

// Makes the rename durable; best effort (some file systems refuse to sync a directory).
void SyncDirectoryOf(const std::string& path) {
  // Built in one expression: GCC 12 at -O3 reports a false -Wrestrict for `s = "."` here.
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string directory = parent.empty() ? std::string(".") : parent;
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// ---- tensors -------------------------------------------------------------------------------

// Little-endian on disk: reverses each element's bytes on a big-endian host.
void ToLittleEndian(std::vector<uint8_t>& data, size_t element) {
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + element <= data.size(); i += element) {
      std::reverse(data.begin() + static_cast<std::ptrdiff_t>(i),
                   data.begin() + static_cast<std::ptrdiff_t>(i + element));
    }
  } else {
    (void)data;
    (void)element;
  }
}

[[noreturn]] void NotOnHost(const Tensor& tensor) {
  throw Error(CHORUS_UNSUPPORTED, std::string("checkpoint: a ") + DtypeName(tensor.dtype()) +
                                      " tensor on " + tensor.device().name() +
                                      " cannot be read on the host; only f32 can");
}

}  // namespace

std::vector<uint8_t> EncodeCheckpoint(const std::vector<CheckpointEntry>& entries) {
  std::vector<uint8_t> out(kCheckpointMagic.begin(), kCheckpointMagic.end());
  PutLittleEndian(out, static_cast<uint64_t>(entries.size()));
  for (const CheckpointEntry& entry : entries) PutEntry(out, entry);
  PutLittleEndian(out, Fnv1a64(out.data(), out.size()));
  return out;
}

std::vector<CheckpointEntry> DecodeCheckpoint(const std::vector<uint8_t>& file,
                                              const std::string& path) {
  CheckMagic(file, path);
  uint64_t stored = 0, computed = 0;
  const bool checksum_ok = ChecksumMatches(file, stored, computed);
  Parsed parsed = ParseEntries(file);
  if (!checksum_ok) ExplainMismatch(file, path, parsed, stored, computed);
  if (parsed.problem) Malformed(path, "malformed " + parsed.problem->what);
  if (parsed.trailing != kChecksumBytes) {
    Malformed(path, "malformed: " + std::to_string(parsed.trailing - kChecksumBytes) +
                        " unexpected bytes after the last entry");
  }
  return std::move(parsed.entries);
}

std::string TemporaryNameFor(const std::string& path) {
  uint32_t random = 0;
  RandomBytes(&random, sizeof(random));
  char suffix[48];
  std::snprintf(suffix, sizeof(suffix), ".tmp.%lld.%08x", static_cast<long long>(::getpid()),
                random);
  return path + suffix;
}

bool IsTemporaryNameOf(const std::string& name, const std::string& target) {
  const std::string prefix = target + ".tmp.";
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0;
}

void WriteFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string temporary = TemporaryNameFor(path);
  // O_EXCL: a name some other writer chose (or left behind) is never written into.
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) FileError(CHORUS_INVALID_ARGUMENT, "create", temporary, errno);
  try {
    WriteAll(fd, bytes, temporary);
  } catch (...) {
    ::close(fd);
    std::remove(temporary.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    FileError(CHORUS_INTERNAL, "close", temporary, error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    FileError(CHORUS_INVALID_ARGUMENT, "rename '" + temporary + "' to", path, error);
  }
  SyncDirectoryOf(path);
}

std::vector<uint8_t> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) FileError(CHORUS_NOT_FOUND, "open", path, errno);
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      FileError(CHORUS_INVALID_ARGUMENT, "read", path, error);
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  ::close(fd);
  return bytes;
}

std::vector<uint8_t> TensorBytes(const Tensor& tensor) {
  std::vector<uint8_t> data(tensor.bytes());
  if (tensor.host_accessible()) {
    if (!data.empty()) std::memcpy(data.data(), tensor.raw(), data.size());
  } else if (tensor.dtype() == CHORUS_F32) {
    const std::vector<float> values = tensor.ToVector();
    if (!data.empty()) std::memcpy(data.data(), values.data(), data.size());
  } else {
    NotOnHost(tensor);
  }
  ToLittleEndian(data, chorus_dtype_size(tensor.dtype()));
  return data;
}

void AssignBytes(const Tensor& tensor, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> native = data;
  ToLittleEndian(native, chorus_dtype_size(tensor.dtype()));  // its own inverse
  if (native.size() != tensor.bytes()) {
    throw Error(CHORUS_INTERNAL, "checkpoint: " + std::to_string(native.size()) +
                                     " bytes for a tensor of " + std::to_string(tensor.bytes()));
  }
  if (tensor.host_accessible()) {
    if (!native.empty()) std::memcpy(tensor.raw(), native.data(), native.size());
  } else if (tensor.dtype() == CHORUS_F32) {
    std::vector<float> values(native.size() / sizeof(float));
    if (!native.empty()) std::memcpy(values.data(), native.data(), native.size());
    tensor.Assign(Tensor::FromVector(tensor.device(), tensor.shape(), values));
  } else {
    NotOnHost(tensor);
  }
}

}  // namespace chorus::internal
