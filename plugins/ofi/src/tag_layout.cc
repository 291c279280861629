#include "tag_layout.h"

#include <bit>
#include <chorus/plugin_sdk.hpp>
#include <sstream>

namespace chorus::ofi {

TagLayout::TagLayout(uint64_t mem_tag_format, int size, bool directed) {
  usable_bits_ = mem_tag_format == 0 ? 64 : 64 - std::countl_zero(mem_tag_format);
  rank_bits_ = 0;
  if (!directed) {
    // Bits for ranks 0..size-1, at least one (so that the layout is the same for every size).
    const uint64_t largest_rank = size > 1 ? static_cast<uint64_t>(size - 1) : 1;
    rank_bits_ = 64 - std::countl_zero(largest_rank);
  }
  if (rank_bits_ >= usable_bits_) {
    sdk::Fail(CHORUS_UNAVAILABLE, "ofi: the provider offers ", usable_bits_,
              " tag bits (mem_tag_format 0x", std::hex, mem_tag_format, std::dec,
              "), too few for the ", rank_bits_, " bits that carry the rank of ", size,
              " ranks; choose a provider with FI_DIRECTED_RECV or more tag bits");
  }
  tag_bits_ = usable_bits_ - rank_bits_;
}

uint64_t TagLayout::Encode(int sender, uint64_t tag) const {
  if (tag > max_tag()) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "ofi: tag ", tag, " does not fit: ", Describe(),
              ", so tags run 0..", max_tag(), "; use a smaller tag");
  }
  if (rank_bits_ == 0) return tag;
  return (static_cast<uint64_t>(sender) << tag_bits_) | tag;
}

std::string TagLayout::Describe() const {
  std::ostringstream out;
  out << "the provider tag has " << usable_bits_ << " usable bits";
  if (rank_bits_ == 0) {
    out << ", all for the chorus tag (FI_DIRECTED_RECV names the source)";
  } else {
    out << ": the top " << rank_bits_ << " carry the sending rank, the low " << tag_bits_
        << " the chorus tag";
  }
  return out.str();
}

}  // namespace chorus::ofi
