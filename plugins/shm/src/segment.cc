#include "segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <new>
#include <random>

namespace chorus::shm {
namespace {

constexpr uint64_t kMagic = 0x63686f7275737369ULL;  // "chorusshi": signatures beside the phase
constexpr size_t kHeaderBytes = 256;
constexpr size_t kDataAlign = 4096;

size_t ControlsEnd(uint32_t size) { return kHeaderBytes + size * sizeof(RankControl); }
size_t DataStart(uint32_t size) {
  return (ControlsEnd(size) + kDataAlign - 1) / kDataAlign * kDataAlign;
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

size_t Segment::TotalBytes(uint32_t size, size_t chunk_bytes) {
  return DataStart(size) + size_t{2} * size * chunk_bytes;
}

Segment::Segment(std::string name, void* base, size_t bytes, uint32_t size, size_t chunk_bytes,
                 bool owner)
    : name_(std::move(name)),
      base_(base),
      bytes_(bytes),
      size_(size),
      chunk_bytes_(chunk_bytes),
      linked_(owner) {}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      base_(other.base_),
      bytes_(other.bytes_),
      size_(other.size_),
      chunk_bytes_(other.chunk_bytes_),
      linked_(other.linked_) {
  other.base_ = nullptr;
  other.linked_ = false;
}

Segment::~Segment() {
  if (linked_) ::shm_unlink(name_.c_str());
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

void Segment::Unlink() {
  ::shm_unlink(name_.c_str());
  linked_ = false;
}

RankControl& Segment::control(uint32_t rank) const {
  return reinterpret_cast<RankControl*>(static_cast<unsigned char*>(base_) + kHeaderBytes)[rank];
}

unsigned char* Segment::buffer(uint32_t rank, uint32_t which) const {
  return static_cast<unsigned char*>(base_) + DataStart(size_) +
         (size_t{2} * rank + which) * chunk_bytes_;
}

std::string Segment::UniqueName(const std::string& prefix) {
  std::random_device random;
  const uint64_t number = (uint64_t{random()} << 32) | random();
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(number);
}

Segment Segment::Create(const std::string& name, uint32_t size, size_t chunk_bytes) {
  const size_t bytes = TotalBytes(size, chunk_bytes);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) sdk::Fail(CHORUS_UNAVAILABLE, "shm: cannot create ", name, ": ", ErrnoText());
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string error = ErrnoText();
    ::close(fd);
    ::shm_unlink(name.c_str());
    sdk::Fail(CHORUS_OUT_OF_MEMORY, "shm: cannot size ", name, " to ", bytes, " bytes: ", error,
              " (is /dev/shm large enough? option chunk_bytes makes the segment smaller)");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string error = ErrnoText();
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    sdk::Fail(CHORUS_OUT_OF_MEMORY, "shm: cannot map ", name, ": ", error);
  }
  // ftruncate zero-fills; construct the atomics in place before anyone else can map them.
  auto* header = new (base) SegmentHeader{};
  header->size = size;
  header->chunk_bytes = chunk_bytes;
  header->total_bytes = bytes;
  header->failed_rank.store(-1);
  Segment segment(name, base, bytes, size, chunk_bytes, true);
  for (uint32_t r = 0; r < size; ++r) {
    new (&segment.control(r)) RankControl{};
    segment.control(r).cpu.store(-1);
  }
  header->magic = kMagic;
  return segment;
}

Segment Segment::Open(const std::string& name, uint32_t size, size_t chunk_bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0 && errno == ENOENT) {
    // The ranks agreed they share one machine, so another rank removed it: it gave up.
    sdk::Fail(CHORUS_PEER_LOST, "shm: the segment ", name,
              " was removed before this rank mapped it: another rank gave up setting up the "
              "communicator (its own error says why)");
  }
  if (fd < 0) {
    sdk::Fail(CHORUS_UNAVAILABLE, "shm: cannot open the segment ", name,
              " that rank 0 created: ", ErrnoText(),
              " (every rank must run on one machine, sharing /dev/shm)");
  }
  const size_t bytes = TotalBytes(size, chunk_bytes);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string error = ErrnoText();
  ::close(fd);
  if (base == MAP_FAILED) sdk::Fail(CHORUS_OUT_OF_MEMORY, "shm: cannot map ", name, ": ", error);
  Segment segment(name, base, bytes, size, chunk_bytes, false);
  const SegmentHeader& header = segment.header();
  if (header.magic != kMagic || header.size != size || header.chunk_bytes != chunk_bytes) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "shm: the segment ", name, " holds ", header.size,
              " ranks with chunks of ", header.chunk_bytes, " bytes, but this rank expects ", size,
              " and ", chunk_bytes, "; give every rank the same size and chunk_bytes");
  }
  return segment;
}

}  // namespace chorus::shm
