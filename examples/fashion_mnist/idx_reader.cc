#include "idx_reader.h"

#include <chorus/base/error.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace fashion_mnist {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
// More bytes than any IDX file this example reads could hold; guards the size arithmetic.
constexpr int64_t kMaxElements = int64_t{1} << 40;

[[noreturn]] void Fail(const std::string& name, const std::string& problem) {
  throw chorus::Error(CHORUS_INVALID_ARGUMENT, name + ": " + problem);
}

std::string Hex(uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%0*x", digits, value);
  return text;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The whole (decompressed) content. zlib reads a file that is not gzip data as it is.
std::vector<uint8_t> ReadAll(const std::string& path) {
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  if (probe == nullptr) Fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::fclose(probe);
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) Fail(path, "cannot open with zlib");
  std::vector<uint8_t> content;
  std::vector<uint8_t> chunk(1 << 16);
  for (;;) {
    const int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = Z_OK;
      const std::string message = gzerror(file, &code);
      gzclose(file);
      Fail(path, "corrupt gzip data: " + message);
    }
    if (n == 0) break;
    content.insert(content.end(), chunk.begin(), chunk.begin() + n);
  }
  int code = Z_OK;
  const std::string message = gzerror(file, &code);
  const int closed = gzclose(file);
  if (code != Z_OK || closed != Z_OK) {
    Fail(path, "corrupt gzip data: " + (code != Z_OK ? message : "truncated or bad checksum"));
  }
  return content;
}

}  // namespace

IdxArray ParseIdx(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.size() < 4) {
    Fail(name, "truncated: " + std::to_string(bytes.size()) +
                   " bytes, shorter than the 4-byte IDX magic number");
  }
  const uint32_t magic = BigEndian32(bytes.data());
  const int ndims = bytes[3];
  if (bytes[0] != 0 || bytes[1] != 0 || ndims == 0) {
    Fail(name, "not an IDX file: bad magic number " + Hex(magic, 8) +
                   " (an IDX file starts with two zero bytes, a type code and the number of "
                   "dimensions, e.g. 0x00000803 for images, 0x00000801 for labels)");
  }
  if (bytes[2] != kUnsignedByte) {
    Fail(name, "unsupported IDX element type " + Hex(bytes[2], 2) +
                   "; only unsigned byte (0x08) is supported");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (bytes.size() < header) {
    Fail(name, "truncated: the header of " + std::to_string(ndims) + " dimensions needs " +
                   std::to_string(header) + " bytes but the file has " +
                   std::to_string(bytes.size()));
  }
  IdxArray array;
  int64_t elements = 1;
  std::string shape;
  for (int d = 0; d < ndims; ++d) {
    const int64_t dim = BigEndian32(bytes.data() + 4 + 4 * d);
    array.dims.push_back(dim);
    shape += (d ? "x" : "") + std::to_string(dim);
    elements = dim == 0 ? 0 : elements * dim;
    if (elements > kMaxElements) Fail(name, "implausible dimensions " + shape + "...");
  }
  const size_t available = bytes.size() - header;
  if (available < static_cast<size_t>(elements)) {
    Fail(name, "truncated: the header gives dimensions " + shape + " (" + std::to_string(elements) +
                   " bytes of data) but the file has only " + std::to_string(available) +
                   " bytes of data");
  }
  if (available > static_cast<size_t>(elements)) {
    Fail(name, "has " + std::to_string(available - static_cast<size_t>(elements)) +
                   " unexpected bytes after the " + std::to_string(elements) +
                   " bytes of data of dimensions " + shape);
  }
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

IdxArray ReadIdx(const std::string& path) { return ParseIdx(ReadAll(path), path); }

}  // namespace fashion_mnist
