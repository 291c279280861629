// How a message is split into provider operations.
//
// A message larger than `chunk_bytes` (the provider's max_msg_size, or the option) goes in chunks
// of that size. One a little above ofi_rxm's eager limit goes in pieces of the limit: ofi_rxm
// sends a message up to the limit in one bounce buffer and a larger one by segmentation and
// reassembly, whose first segments cost more than a whole eager message (fi_pingpong -m tagged
// over tcp;ofi_rxm, 2026-11-26: 16 KiB 14.5 us, 32 KiB 38 us, 64 KiB 47 us). In pieces, chorus's
// ping-pong took 18-21 instead of 34-37 us at 32 KiB and 32-40 instead of 44-56 at 64 KiB (most
// rounds; plugins/ofi/README.md has all); at 128 KiB (8 pieces) it was slower than whole, hence
// the kEagerPieces cap. Every rank must split alike (a receive posts the pieces its sender
// sends): the endpoints compare their settings at create.
#ifndef CHORUS_OFI_MESSAGE_PIECES_H_
#define CHORUS_OFI_MESSAGE_PIECES_H_

#include <algorithm>
#include <cstddef>

namespace chorus::ofi {

// A message of more than kEagerPieces x the eager limit goes whole (by rendezvous or SAR).
inline constexpr size_t kEagerPieces = 4;

// The size of each operation but the last for a message of `bytes`; eager_bytes 0: no eager
// pieces. chunk_bytes > 0.
inline size_t PieceBytes(size_t bytes, size_t chunk_bytes, size_t eager_bytes) {
  if (eager_bytes > 0 && bytes > eager_bytes && (bytes - 1) / kEagerPieces < eager_bytes) {
    return std::min(eager_bytes, chunk_bytes);
  }
  return chunk_bytes;
}

}  // namespace chorus::ofi

#endif  // CHORUS_OFI_MESSAGE_PIECES_H_
