// The on-disk format of chorus::Checkpoint (private to the core).
//
//   magic       12 bytes  "CHORUSCKPT1\n"
//   count       u64       number of entries
//   count times:
//     key_len   u32       bytes of the key
//     key       key_len bytes, UTF-8, no terminator
//     dtype     u32       chorus_dtype value (CHORUS_F32 = 0, CHORUS_I64 = 5, ...)
//     rank      u32
//     dims      rank x i64
//     nbytes    u64       = product(dims) * chorus_dtype_size(dtype)
//     data      nbytes bytes, the elements in row-major order, each little-endian
//   checksum    u64       64-bit FNV-1a of every byte before it (magic included)
//
// Every integer is little-endian. Entries are written in the order they were tracked; readers
// look them up by key and ignore keys they do not know.
#ifndef CHORUS_CORE_SRC_CHECKPOINT_FORMAT_H_
#define CHORUS_CORE_SRC_CHECKPOINT_FORMAT_H_

#include <chorus/plugin.h>
#include <chorus/runtime/tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/fnv1a.h"

namespace chorus::internal {

inline constexpr std::string_view kCheckpointMagic = "CHORUSCKPT1\n";

struct CheckpointEntry {
  std::string key;
  chorus_dtype dtype = CHORUS_F32;
  Shape shape;
  std::vector<uint8_t> data;  // little-endian elements
};

// The whole file, checksum included.
std::vector<uint8_t> EncodeCheckpoint(const std::vector<CheckpointEntry>& entries);
// Parses a whole file. Throws Error(INVALID_ARGUMENT) naming `path` and the problem: "not a
// chorus checkpoint", "truncated", "checksum mismatch" or a malformed entry.
std::vector<CheckpointEntry> DecodeCheckpoint(const std::vector<uint8_t>& file,
                                              const std::string& path);

// Writes a temporary file beside `path` whose name is unique to this writer (TemporaryNameFor),
// syncs it, renames it over `path` and syncs the directory: `path` is the old file or the whole
// new one, never a part. On failure the temporary file is removed and `path` left as it was.
// Throws Error naming the file and the system's reason ("No space left on device").
void WriteFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes);
// `path` + ".tmp." + this process's id + "." + 8 random hex digits: two writers (two jobs, two
// threads) never share one.
std::string TemporaryNameFor(const std::string& path);
// Whether `name` is a temporary name TemporaryNameFor gave for a file named `target`.
bool IsTemporaryNameOf(const std::string& name, const std::string& target);
// Throws Error(NOT_FOUND) when the file cannot be opened.
std::vector<uint8_t> ReadWholeFile(const std::string& path);

// A tensor's elements as little-endian bytes, and back (into a tensor of that dtype and shape).
std::vector<uint8_t> TensorBytes(const Tensor& tensor);
void AssignBytes(const Tensor& tensor, const std::vector<uint8_t>& data);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_SRC_CHECKPOINT_FORMAT_H_
