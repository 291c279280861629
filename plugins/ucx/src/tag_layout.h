// tag_layout.h: how a chorus message's (source rank, tag) becomes one 64-bit UCP tag.
//
// UCP matches tags worker-wide, not per endpoint, so the source rank travels in the tag and a
// receive matches the whole 64 bits (mask all ones):
//
//   bits 63..44  source rank            (20 bits: up to 1,048,575 ranks; all ones: control)
//   bits 43..36  chorus tag bits 63..56 (the "high byte" the core's ring marks its tags with)
//   bits 35..0   chorus tag bits 35..0
//
// A chorus tag fits when its bits 55..36 are zero: every tag below 2^36, and the core's ring
// tags ('R' << 56 | phase). The map is one-to-one on the tags that fit; another tag is refused
// with INVALID_ARGUMENT rather than folded onto one that could match the wrong message.
#ifndef CHORUS_PLUGINS_UCX_TAG_LAYOUT_H_
#define CHORUS_PLUGINS_UCX_TAG_LAYOUT_H_

#include <chorus/plugin_sdk.hpp>
#include <cstdint>
#include <cstdio>

namespace chorus::ucx {

inline constexpr int kRankBits = 20;
// The rank field's last value marks the transport's own messages (the connection handshake).
inline constexpr int64_t kMaxRanks = (int64_t{1} << kRankBits) - 1;
inline constexpr int kLowTagBits = 36;
inline constexpr uint64_t kLowTagMask = (uint64_t{1} << kLowTagBits) - 1;
inline constexpr uint64_t kHighByteMask = uint64_t{0xff} << 56;
// Bits of a chorus tag that must be zero (55..36).
inline constexpr uint64_t kUnusedTagBits = ~(kHighByteMask | kLowTagMask);
inline constexpr uint64_t kFullMask = ~uint64_t{0};

inline bool TagFits(uint64_t tag) { return (tag & kUnusedTagBits) == 0; }

// The UCP tag of chorus tag `tag` sent by rank `source`; throws INVALID_ARGUMENT when `tag`
// does not fit. `source` is checked against kMaxRanks at create.
inline uint64_t UcpTag(int32_t source, uint64_t tag, const char* what) {
  if (!TagFits(tag)) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(tag));
    sdk::Fail(CHORUS_INVALID_ARGUMENT, what, ": tag ", tag, " (", hex,
              ") does not fit the ucx transport's tag layout: bits 55..36 must be zero (tags "
              "below 2^36, optionally with a marker in the top byte, as the core's ring uses); "
              "use a smaller tag");
  }
  return (static_cast<uint64_t>(source) << (64 - kRankBits)) | ((tag >> 56) << kLowTagBits) |
         (tag & kLowTagMask);
}

// The UCP tag of the handshake message `source` sends (ControlTag never collides with UcpTag).
inline uint64_t ControlTag(int32_t source) {
  return (static_cast<uint64_t>(kMaxRanks) << (64 - kRankBits)) | static_cast<uint64_t>(source);
}

}  // namespace chorus::ucx

#endif  // CHORUS_PLUGINS_UCX_TAG_LAYOUT_H_
