#include "sizes.h"

#include <cctype>
#include <limits>
#include <stdexcept>

namespace chorus::bench {

uint64_t ParseSize(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("bad size '" + std::string(text) + "' (" + why +
                                 "); use bytes with an optional suffix K, M or G, e.g. 4K, 64M");
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  if (digits == 0) throw bad("no number");
  uint64_t shift = 0;
  if (digits < text.size()) {
    if (digits + 1 != text.size())
      throw bad("unknown suffix '" + std::string(text.substr(digits)) + "'");
    switch (std::toupper(static_cast<unsigned char>(text[digits]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        throw bad("unknown suffix '" + std::string(text.substr(digits)) + "'");
    }
  }
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) throw bad("too large");
    value = value * 10 + digit;
  }
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    throw bad("too large");
  }
  return value << shift;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kSuffixes[] = {"G", "M", "K"};
  static constexpr int kShifts[] = {30, 20, 10};
  for (int i = 0; i < 3; ++i) {
    const uint64_t unit = uint64_t{1} << kShifts[i];
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + kSuffixes[i];
  }
  return std::to_string(bytes);
}

std::vector<uint64_t> SizeSweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor) {
  if (min_bytes > max_bytes) {
    throw std::invalid_argument("-b " + FormatSize(min_bytes) + " is larger than -e " +
                                FormatSize(max_bytes) +
                                "; the minimum size must not exceed the maximum");
  }
  if (factor < 2) {
    throw std::invalid_argument("-f " + std::to_string(factor) +
                                ": the multiplication factor must be at least 2");
  }
  std::vector<uint64_t> sizes;
  uint64_t size = min_bytes;
  if (size == 0) {
    sizes.push_back(0);
    size = 1;
  }
  while (size <= max_bytes) {
    sizes.push_back(size);
    if (size > max_bytes / factor) break;
    size *= factor;
  }
  return sizes;
}

}  // namespace chorus::bench
