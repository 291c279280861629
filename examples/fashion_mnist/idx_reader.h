// Reads IDX files (the format of MNIST and Fashion-MNIST), raw or gzip-compressed.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_IDX_READER_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fashion_mnist {

// An IDX array of unsigned bytes (type code 0x08), the only type Fashion-MNIST uses.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, NumElements(dims) bytes
};

// Reads `path`: a raw IDX file, or one compressed with gzip (recognised by its content, not its
// name). Throws chorus::Error(INVALID_ARGUMENT) naming the file and the problem: unreadable, a
// bad magic number, a type other than unsigned byte, truncated, or trailing bytes.
IdxArray ReadIdx(const std::string& path);

// Parses the bytes of an uncompressed IDX file; `name` is used in error messages.
IdxArray ParseIdx(const std::vector<uint8_t>& bytes, const std::string& name);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_IDX_READER_H_
