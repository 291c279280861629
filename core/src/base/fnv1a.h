// FNV-1a, 64 bits: a hash that is the same in every process and build, for names that must
// agree between processes (store keys as file names, cache files) and for checksums.
#ifndef CHORUS_BASE_FNV1A_H_
#define CHORUS_BASE_FNV1A_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace chorus::internal {

inline uint64_t Fnv1a64(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

inline uint64_t Fnv1a64(std::string_view text) { return Fnv1a64(text.data(), text.size()); }

}  // namespace chorus::internal

#endif  // CHORUS_BASE_FNV1A_H_
