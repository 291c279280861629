// The shared memory segment every rank of one shm communicator maps: a header, one control block
// per rank (its phase counter, pid and operation signatures, each on cache lines of its own) and
// two data buffers per rank (double buffering: round k uses buffer k % 2).
//
// Lifetime: rank 0 picks a unique name (its pid and a random number) and publishes it in the
// rendezvous store; every rank reads it before rank 0 creates the segment; every rank maps it
// and counts itself in; the last one to do so unlinks the name (so nothing stays in /dev/shm, even
// after a crash), and a rank that gives up before then unlinks it too (ShmCommunicator); the
// memory goes when the last rank unmaps it.
#ifndef CHORUS_SHM_SEGMENT_H_
#define CHORUS_SHM_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::shm {

// What every rank must agree on for one operation. 24 bytes: two of them (by sequence parity)
// share the phase counter's cache line, so that a barrier moves one line per rank between cores.
struct Signature {
  uint64_t sequence;
  uint64_t count;
  int32_t root;
  uint8_t op, dtype, reduce, unused;
  bool operator==(const Signature&) const = default;
};
static_assert(sizeof(Signature) == 24);

struct alignas(64) RankControl {
  std::atomic<uint64_t> phase;  // completed barrier phases: the rank's progress
  Signature signature[2];       // by operation sequence parity (see ShmCommunicator)
  // Read only while waiting (liveness, placement): a line of its own.
  alignas(64) std::atomic<int32_t> pid;
  std::atomic<int32_t> cpu;  // the cpu it last ran on when it began waiting, -1 before
};
static_assert(sizeof(RankControl) == 128);

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint64_t size;         // ranks
  uint64_t chunk_bytes;  // bytes of one data buffer
  uint64_t total_bytes;
  std::atomic<uint32_t> attached;      // ranks that mapped the segment
  std::atomic<int32_t> failed_rank;    // -1, or the first rank whose operation failed
  std::atomic<int32_t> failed_status;  // its chorus_status
};

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "shm needs lock-free atomics: they live in memory shared between processes");

class Segment {
 public:
  // "<prefix>-<pid>-<random>": a name no other communicator uses.
  static std::string UniqueName(const std::string& prefix);
  // Rank 0: creates and sizes a new segment `name`, which must not exist. Throws sdk::Error.
  static Segment Create(const std::string& name, uint32_t size, size_t chunk_bytes);
  // Other ranks: maps the segment rank 0 created. Throws sdk::Error.
  static Segment Open(const std::string& name, uint32_t size, size_t chunk_bytes);
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&&) = delete;
  ~Segment();

  const std::string& name() const { return name_; }
  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
  RankControl& control(uint32_t rank) const;
  // Data buffer `which` (0 or 1) of `rank`: chunk_bytes bytes, 64-byte aligned.
  unsigned char* buffer(uint32_t rank, uint32_t which) const;
  size_t chunk_bytes() const { return chunk_bytes_; }
  // Removes the name (the mapping stays). The last rank to attach calls it.
  void Unlink();

  static size_t TotalBytes(uint32_t size, size_t chunk_bytes);

 private:
  Segment(std::string name, void* base, size_t bytes, uint32_t size, size_t chunk_bytes,
          bool owner);

  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t size_ = 0;
  size_t chunk_bytes_ = 0;
  bool linked_ = false;  // this object created the name, and no one here has unlinked it
};

}  // namespace chorus::shm

#endif  // CHORUS_SHM_SEGMENT_H_
