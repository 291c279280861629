// Byte sizes on the command line ("4K", "64M", "1G", "100") and the sweep -b/-e/-f describes.
#ifndef CHORUS_TOOLS_BENCH_SIZES_H_
#define CHORUS_TOOLS_BENCH_SIZES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::bench {

// A decimal count of bytes with an optional suffix K, M or G (binary: 1K = 1024, as nccl-tests;
// lower case accepted). Throws std::invalid_argument naming the text and the valid forms.
uint64_t ParseSize(std::string_view text);

// "4K", "64M", "1G" when the size is an exact multiple, else the bytes ("1000").
std::string FormatSize(uint64_t bytes);

// min, min*factor, min*factor^2, ... up to max (inclusive). A min of 0 gives 0 and then starts
// again at 1 byte. Throws std::invalid_argument when min > max or factor < 2.
std::vector<uint64_t> SizeSweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_SIZES_H_
