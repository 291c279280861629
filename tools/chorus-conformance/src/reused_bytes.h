// Zeroed byte storage for the kit's host tensors that reuses freed blocks of 64 KiB and more.
//
// Why: a sweep makes and drops tens of thousands of tensors of up to a few MiB. Under
// AddressSanitizer every allocation above 128 KiB is a fresh mmap, whose pages fault on first
// touch, and a munmap when it leaves the quarantine; on VMs with slow page faults that was most
// of the kit's time (perf: 35-60% of a CrossDeviceOps or Algorithm test in faults and the first
// memset). A block taken from here has its pages already mapped. glibc's malloc reuses such
// blocks by itself, so release builds gain little.
//
// A block is reused only for the same size: a plugin writes into these tensors (the algorithm and
// collective sweeps hand them over as its buffers), and AddressSanitizer must still see a write
// one byte past the end, which room left in a larger block would hide.
#ifndef CHORUS_CONFORMANCE_REUSED_BYTES_H_
#define CHORUS_CONFORMANCE_REUSED_BYTES_H_

#include <cstddef>
#include <vector>

namespace chorus::conformance::internal {

// `size` zero bytes whose capacity is `size`, in a block given back earlier when one of that
// size is kept. Thread-safe: ranks run as threads.
std::vector<unsigned char> TakeZeroedBytes(size_t size);

// Keeps `bytes`' block for a later TakeZeroedBytes when it is 64 KiB or more; the oldest kept
// blocks are freed to keep them within 128 MiB.
void GiveBackBytes(std::vector<unsigned char>&& bytes);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_REUSED_BYTES_H_
