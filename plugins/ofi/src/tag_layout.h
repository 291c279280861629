// How a chorus tag (64 bits) and the sending rank map onto a provider's tag bits.
//
// A provider offers `usable_bits` tag bits (from its mem_tag_format: the bits up to the highest
// one it sets). With FI_DIRECTED_RECV a receive names its source address, so the provider tag is
// the chorus tag itself. Without it, the top `rank_bits` of the usable bits carry the sender's
// rank (enough bits for size - 1) and the bits below them the chorus tag:
//
//   bit usable_bits-1 ........ bit tag_bits | bit tag_bits-1 ...... bit 0
//          sending rank (rank_bits)          |   chorus tag (tag_bits)
//
// A chorus tag that does not fit into tag_bits is refused (INVALID_ARGUMENT naming the limit).
#ifndef CHORUS_OFI_TAG_LAYOUT_H_
#define CHORUS_OFI_TAG_LAYOUT_H_

#include <cstdint>
#include <string>

namespace chorus::ofi {

class TagLayout {
 public:
  // mem_tag_format: the provider's (0 reads as 64 bits); directed: FI_DIRECTED_RECV granted.
  TagLayout(uint64_t mem_tag_format, int size, bool directed);

  int usable_bits() const { return usable_bits_; }
  int rank_bits() const { return rank_bits_; }
  uint64_t max_tag() const { return tag_bits_ >= 64 ? UINT64_MAX : (uint64_t{1} << tag_bits_) - 1; }

  // The provider tag of chorus tag `tag` sent by rank `sender`; throws INVALID_ARGUMENT when the
  // tag does not fit.
  uint64_t Encode(int sender, uint64_t tag) const;
  // One line for messages and the README: "64 usable bits: 1 for the rank, 63 for the tag".
  std::string Describe() const;

 private:
  int usable_bits_;
  int rank_bits_;
  int tag_bits_;
};

}  // namespace chorus::ofi

#endif  // CHORUS_OFI_TAG_LAYOUT_H_
