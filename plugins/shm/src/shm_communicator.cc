#include "shm_communicator.h"

#include <immintrin.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chorus/host_cpus.hpp>
#include <chorus/plugin_sdk.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace chorus::shm {
namespace {

using Clock = std::chrono::steady_clock;
using sdk::Fail;

// Busy-wait this long before yielding the core (a yield can hand it to another busy thread for a
// whole time slice), then yield for kYieldFor before sleeping between polls. When the ranks
// outnumber the cpus this process may run on, a rank does not spin at all but yields from the
// start: the rank it waits for, or the rank that one waits for, may need its cpu, and ranks on
// two cpus that spin for each other's core-mates stall each other for the whole spin (a spin of
// 50 us made 4 ranks on 2 cores 1.2-1.8x slower from 4 KiB to 64 MiB). Otherwise the awaited rank
// has a cpu of its own, and yielding would only lose this one's cpu to other work on the machine;
// still a rank yields at once to an awaited rank that last ran on its cpu (WaitForRank).
constexpr auto kSpinForOversubscribed = std::chrono::microseconds(0);
constexpr auto kSpinFor = std::chrono::microseconds(2000);
constexpr auto kYieldFor = std::chrono::milliseconds(2);
constexpr auto kSleep = std::chrono::microseconds(50);
constexpr auto kLivenessEvery = std::chrono::milliseconds(1);

// Whether process `pid` has ended: gone, or a zombie its parent has not reaped yet (kill(pid, 0)
// still succeeds for one, and a launcher busy elsewhere may leave it so for the whole time-out).
bool ProcessGone(int32_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!file || !std::getline(file, stat)) return false;
  const size_t end_of_name = stat.rfind(')');
  return end_of_name != std::string::npos && end_of_name + 2 < stat.size() &&
         (stat[end_of_name + 2] == 'Z' || stat[end_of_name + 2] == 'X');
}
// The last-level cache, from sysfs (getconf's figure is the whole socket's on some VMs); 32 MiB
// when sysfs does not say.
size_t LastLevelCacheBytes() {
  static const size_t bytes = [] {
    size_t largest = 0;
    for (int index = 0; index < 8; ++index) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
      std::ifstream size_file(dir + "/size");
      size_t value = 0;
      char unit = 0;
      if (!(size_file >> value)) continue;
      size_file >> unit;
      value *= unit == 'K' ? size_t{1} << 10 : unit == 'M' ? size_t{1} << 20 : 1;
      largest = std::max(largest, value);
    }
    return largest > 0 ? largest : size_t{32} << 20;
  }();
  return bytes;
}
// Ranks whose buffers one fused reduce takes (more ranks reduce pairwise).
constexpr uint32_t kMaxReduceInputs = 64;

// "hostname/boot-id": equal for two processes exactly when they run on one machine.
std::string ThisMachine() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(host) + "/" + boot;
}

// Why the rank whose process is `pid` may not have answered, for a time-out's message: a process
// that is stopped (SIGSTOP, a debugger) is alive but cannot answer; its state is in
// /proc/<pid>/stat, after the parenthesised command name. Otherwise the usual suspect.
std::string WhyNoAnswer(int32_t pid) {
  std::string stat;
  if (pid > 0) std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/stat"), stat);
  const auto close = stat.rfind(')');
  if (close != std::string::npos && close + 2 < stat.size() &&
      (stat[close + 2] == 'T' || stat[close + 2] == 't')) {
    return "; its process (pid " + std::to_string(pid) +
           ") is stopped (SIGSTOP or a debugger): alive but unable to answer";
  }
  return " (is every rank issuing the same operations?)";
}

class Store {
 public:
  Store(const chorus_kv_store& store, int64_t timeout_ms)
      : store_(store), timeout_ms_(timeout_ms) {}
  void Set(const std::string& key, const std::string& value) {
    Check(store_.set(store_.ctx, key.c_str(), value.data(), value.size()), "set", key);
  }
  std::string Get(const std::string& key) {
    std::string value(256, '\0');
    size_t size = 0;
    Check(store_.get(store_.ctx, key.c_str(), timeout_ms_, value.data(), value.size(), &size),
          "get", key);
    if (size > value.size()) {
      value.resize(size);
      Check(store_.get(store_.ctx, key.c_str(), timeout_ms_, value.data(), value.size(), &size),
            "get", key);
    }
    value.resize(size);
    return value;
  }
  int64_t Add(const std::string& key, int64_t delta) {
    int64_t result = 0;
    Check(store_.add(store_.ctx, key.c_str(), delta, &result), "add", key);
    return result;
  }

 private:
  void Check(chorus_status status, const char* what, const std::string& key) {
    if (status == CHORUS_OK) return;
    if (status == CHORUS_TIMEOUT) {
      Fail(CHORUS_TIMEOUT, "shm create: waited ", timeout_ms_, " ms for the rendezvous key '", key,
           "': a rank did not arrive (is every rank creating the communicator?)");
    }
    Fail(status, "shm create: the rendezvous store's ", what, " of '", key, "' failed");
  }
  const chorus_kv_store& store_;
  int64_t timeout_ms_;
};

// Elements [begin, end) of `n` that rank `r` of `size` reduces.
std::pair<size_t, size_t> SliceOf(uint32_t r, uint32_t size, size_t n) {
  return {n * r / size, n * (r + 1) / size};
}

size_t ElementBytes(chorus_dtype dtype, const char* what) {
  sdk::RequireDtype(dtype, what);
  return chorus_dtype_size(dtype);
}

// memcpy, or with non-temporal stores (x86-64: SSE2 is part of the base ISA) when `streaming`.
// The caller issues StoreFence() before other ranks may rely on the data.
void CopyOut(unsigned char* dst, const unsigned char* src, size_t bytes, bool streaming) {
#if defined(__SSE2__)
  if (streaming) {
    const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
    std::memcpy(dst, src, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64) {
      const auto* from = reinterpret_cast<const __m128i*>(src + i);
      auto* to = reinterpret_cast<__m128i*>(dst + i);
      const __m128i x0 = _mm_loadu_si128(from), x1 = _mm_loadu_si128(from + 1);
      const __m128i x2 = _mm_loadu_si128(from + 2), x3 = _mm_loadu_si128(from + 3);
      _mm_stream_si128(to, x0);
      _mm_stream_si128(to + 1, x1);
      _mm_stream_si128(to + 2, x2);
      _mm_stream_si128(to + 3, x3);
    }
    std::memcpy(dst + i, src + i, bytes - i);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
  (void)streaming;
}

void StoreFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// dst = inputs[0] op inputs[1] op ... (count elements), in blocks small enough that dst stays in
// the L1 cache while every input streams through it once; each block is also copied to `also`
// (unless NULL) while it is in the L1 cache. dst may be inputs[0].
void ReduceMany(unsigned char* dst, std::span<const unsigned char* const> inputs, size_t count,
                size_t element, chorus_dtype dtype, chorus_reduce_op op,
                unsigned char* also = nullptr, bool streaming = false) {
  constexpr size_t kBlockBytes = size_t{16} << 10;
  const size_t per_block = std::max<size_t>(1, kBlockBytes / element);
  for (size_t begin = 0; begin < count; begin += per_block) {
    const size_t n = std::min(per_block, count - begin);
    const size_t offset = begin * element;
    if (inputs.size() == 1) {
      if (dst != inputs[0]) std::memcpy(dst + offset, inputs[0] + offset, n * element);
    } else {
      sdk::ReduceOnHost(dst + offset, inputs[0] + offset, inputs[1] + offset, n, dtype, op);
      for (size_t k = 2; k < inputs.size(); ++k) {
        sdk::ReduceOnHost(dst + offset, dst + offset, inputs[k] + offset, n, dtype, op);
      }
    }
    if (also != nullptr) CopyOut(also + offset, dst + offset, n * element, streaming);
  }
}

void RequireData(const void* p, size_t count, const char* what, const char* name) {
  if (count > 0 && p == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": ", name, " is NULL");
}

// Removes a segment's name unless disarmed: a rank that fails during set-up leaves nothing in
// /dev/shm, whether or not the segment was created yet (ENOENT is no error here).
class UnlinkOnFailure {
 public:
  explicit UnlinkOnFailure(std::string name) : name_(std::move(name)) {}
  UnlinkOnFailure(const UnlinkOnFailure&) = delete;
  UnlinkOnFailure& operator=(const UnlinkOnFailure&) = delete;
  ~UnlinkOnFailure() {
    if (armed_) ::shm_unlink(name_.c_str());
  }
  void Disarm() { armed_ = false; }

 private:
  std::string name_;
  bool armed_ = true;
};

}  // namespace

ShmCommunicator::ShmCommunicator(const chorus_communicator_create_args& args)
    : rank_(static_cast<uint32_t>(args.rank)),
      size_(static_cast<uint32_t>(args.size)),
      timeout_ms_(args.timeout_ms) {
  if (args.size < 1 || args.rank < 0 || args.rank >= args.size) {
    Fail(CHORUS_INVALID_ARGUMENT, "shm create: rank ", args.rank, " of size ", args.size,
         " is not a rank (0 <= rank < size)");
  }
  if (args.store == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "shm create: store is NULL");
  if (args.timeout_ms <= 0) Fail(CHORUS_INVALID_ARGUMENT, "shm create: timeout_ms must be > 0");
  if (args.devices_api != nullptr) {
    Fail(CHORUS_UNSUPPORTED, "shm: buffers on '", args.devices_api->platform,
         "' devices are not supported; shm works on host memory only");
  }
  if (args.num_options > 0 && args.options == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "shm create: num_options is ", args.num_options,
         " but options is NULL");
  }
  for (size_t i = 0; i < args.num_options; ++i) {
    const std::string key = args.options[i].key == nullptr ? "" : args.options[i].key;
    if (key != "chunk_bytes") {
      Fail(CHORUS_INVALID_ARGUMENT, "shm: unknown option '", key, "'; the option is chunk_bytes");
    }
  }
  const bool oversubscribed = sdk::MoreRanksThanCpus(args.size);
  spin_for_ = oversubscribed ? Clock::duration(kSpinForOversubscribed) : Clock::duration(kSpinFor);
  const uint64_t chunk =
      sdk::IntegerOption(args.options, args.num_options, "chunk_bytes", kDefaultChunkBytes);
  if (chunk < 64 * uint64_t{size_} || chunk % 64 != 0 || chunk > (uint64_t{1} << 30)) {
    Fail(CHORUS_INVALID_ARGUMENT, "shm: option chunk_bytes=", chunk,
         " must be a multiple of 64, at least 64 x size (", 64 * uint64_t{size_},
         ") and at most 1 GiB");
  }

  // Every create on one store prefix gets a generation of its own, so keys of an earlier
  // communicator (whose segment is gone) are never read.
  Store store(*args.store, timeout_ms_);
  const int64_t generation = (store.Add("creates", 1) - 1) / size_;
  const std::string prefix = "g" + std::to_string(generation) + "/";
  // Every rank learns the segment's name before rank 0 creates it, so that whichever rank gives
  // up during set-up, in whatever order the others die, can remove it: rank 0 publishes the name
  // first, the others read it before they publish their machine, and rank 0 creates the segment
  // only once it has read every machine.
  std::string name;
  if (rank_ == 0) {
    name = Segment::UniqueName("/chorus-shm");
    store.Set(prefix + "segment", name);
  } else {
    name = store.Get(prefix + "segment");
  }
  UnlinkOnFailure unlink_on_failure(name);
  const std::string machine = ThisMachine();
  store.Set(prefix + "machine/" + std::to_string(rank_), machine);
  std::vector<std::string> machines;
  for (uint32_t r = 0; r < size_; ++r) {
    machines.push_back(store.Get(prefix + "machine/" + std::to_string(r)));
  }
  for (uint32_t r = 0; r < size_; ++r) {
    if (machines[r] == machine) continue;
    Fail(CHORUS_UNSUPPORTED, "shm: every rank must run on one machine, but rank ", rank_,
         " runs on ", machine, " and rank ", r, " on ", machines[r],
         " (host name/boot id); use a collective that crosses machines (gloo, ring_grpc, "
         "core_ring)");
  }

  if (rank_ == 0) {
    segment_ = std::make_unique<Segment>(Segment::Create(name, size_, chunk));
    segment_->control(rank_).pid.store(static_cast<int32_t>(::getpid()));
    store.Set(prefix + "created", "1");
  } else {
    store.Get(prefix + "created");
    // Fault injection for tests: a rank that is slow to map the segment (tests/multiworker).
    if (const char* delay = std::getenv("CHORUS_SHM_TEST_ATTACH_DELAY_MS")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(delay)));
    }
    segment_ = std::make_unique<Segment>(Segment::Open(name, size_, chunk));
    segment_->control(rank_).pid.store(static_cast<int32_t>(::getpid()));
  }
  // The last rank to map the segment removes its name: from then on nothing can be left in
  // /dev/shm. Until then each rank waits, and one that gives up removes it (unlink_on_failure).
  if (segment_->header().attached.fetch_add(1) + 1 == size_) segment_->Unlink();
  WaitUntilEveryRankMapped();
  unlink_on_failure.Disarm();
  sdk::Log(CHORUS_LOG_DEBUG, "shm: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                                 " attached to " + segment_->name() + ", chunks of " +
                                 std::to_string(chunk) + " bytes");
}

void ShmCommunicator::WaitUntilEveryRankMapped() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  while (segment_->header().attached.load() < size_) {
    // A rank that mapped the segment and died will never be joined by the missing ones' work.
    for (uint32_t r = 0; r < size_; ++r) {
      const int32_t pid = segment_->control(r).pid.load();
      if (pid == -1 || (pid > 0 && ProcessGone(pid))) {
        Fail(CHORUS_PEER_LOST, "shm create: rank ", r,
             pid > 0 ? " (pid " + std::to_string(pid) + ")" : "",
             " left before every rank had mapped the shared memory segment; rank ", rank_,
             " gives up and removes the segment");
      }
    }
    if (Clock::now() > deadline) {
      Fail(CHORUS_TIMEOUT, "shm create: only ", segment_->header().attached.load(), " of ", size_,
           " ranks mapped the shared memory segment within ", timeout_ms_,
           " ms (is every rank creating the communicator? CHORUS_TIMEOUT_SECONDS sets the wait)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

ShmCommunicator::~ShmCommunicator() {
  // A rank still waiting for this one fails at once instead of waiting out its time-out.
  if (segment_) segment_->control(rank_).pid.store(-1);
}

void ShmCommunicator::Abort() { aborted_.store(true); }

std::string ShmCommunicator::What() const {
  return std::string("shm ") + sdk::SignatureCodeName(current_op_) + " (rank " +
         std::to_string(rank_) + " of " + std::to_string(size_) + ")";
}

void ShmCommunicator::FailOperation(chorus_status status, const std::string& message) {
  if (status != CHORUS_INVALID_ARGUMENT) {
    // Tell the other ranks, so that they fail now rather than at their time-out.
    int32_t none = -1;
    if (segment_->header().failed_rank.compare_exchange_strong(none, static_cast<int32_t>(rank_))) {
      segment_->header().failed_status.store(status);
    }
    broken_ = status;
    broken_message_ = message;
  }
  Fail(status, message);
}

void ShmCommunicator::Begin(Op op, size_t count, chorus_dtype dtype, chorus_reduce_op reduce,
                            int root) {
  current_op_ = op;
  if (broken_ != CHORUS_OK) {
    Fail(broken_, What(), ": the communicator is unusable after an earlier failure (",
         broken_message_, "); destroy it and create a new one");
  }
  if (aborted_.load()) FailOperation(CHORUS_ABORTED, What() + ": the communicator was aborted");
  deadline_ = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  segment_->control(rank_).signature[sequence_ % 2] = Signature{sequence_,
                                                                count,
                                                                root,
                                                                static_cast<uint8_t>(op),
                                                                static_cast<uint8_t>(dtype),
                                                                static_cast<uint8_t>(reduce),
                                                                0};
  ++sequence_;
}

void ShmCommunicator::WaitForRank(uint32_t rank, uint64_t phase) {
  RankControl& control = segment_->control(rank);
  if (control.phase.load(std::memory_order_acquire) >= phase) return;
  // A rank last seen on this rank's cpu cannot run while this one spins there: then yield at
  // once rather than spin. Ranks publish their cpu as they start waiting (sched_getcpu is a vDSO
  // read), and the spin looks again every 64 pauses, in case the awaited rank moved here.
  const int cpu = sched_getcpu();
  RankControl& own = segment_->control(rank_);
  if (own.cpu.load(std::memory_order_relaxed) != cpu) own.cpu.store(cpu, std::memory_order_relaxed);
  const auto started = Clock::now();
  if (spin_for_ > Clock::duration::zero() && control.cpu.load(std::memory_order_relaxed) != cpu) {
    for (int i = 1;; ++i) {
      _mm_pause();
      if (control.phase.load(std::memory_order_acquire) >= phase) return;
      if (i % 64 == 0 && (Clock::now() - started > spin_for_ ||
                          control.cpu.load(std::memory_order_relaxed) == cpu)) {
        break;
      }
    }
  }
  auto next_check = started;
  const std::string what = What();
  while (control.phase.load(std::memory_order_acquire) < phase) {
    const auto now = Clock::now();
    if (now >= next_check) {
      next_check = now + kLivenessEvery;
      if (aborted_.load() || sdk::HostAbortRequested()) {
        FailOperation(CHORUS_ABORTED, what + ": the communicator was aborted");
      }
      // Read what could fail this wait first, then the phase once more: a rank may complete
      // the phase and then leave (destroy its communicator, exit, fail a later operation) between
      // the loop's check and these loads, and that is no failure of this wait.
      const int32_t failed = segment_->header().failed_rank.load();
      const int32_t pid = control.pid.load();
      const bool gone = pid > 0 && ProcessGone(pid);
      if (control.phase.load(std::memory_order_acquire) >= phase) return;
      if (failed >= 0 && static_cast<uint32_t>(failed) != rank_) {
        // Its process lives on: it gave up (a time-out of its own, say), it did not die.
        FailOperation(CHORUS_PEER_LOST, what + ": rank " + std::to_string(failed) +
                                            " gave up on the operation: it failed with " +
                                            chorus::StatusName(static_cast<chorus_status>(
                                                segment_->header().failed_status.load())));
      }
      if (pid == -1) {
        FailOperation(CHORUS_PEER_LOST, what + ": rank " + std::to_string(rank) +
                                            " destroyed its communicator before taking part");
      }
      if (gone) {
        FailOperation(CHORUS_PEER_LOST, what + ": rank " + std::to_string(rank) + " (pid " +
                                            std::to_string(pid) + ") died: its process ended");
      }
      if (now > deadline_) {
        FailOperation(CHORUS_TIMEOUT, what + ": timed out after " + std::to_string(timeout_ms_) +
                                          " ms waiting for rank " + std::to_string(rank) +
                                          WhyNoAnswer(pid));
      }
    }
    if (now - started < spin_for_ + kYieldFor) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(kSleep);
    }
  }
}

void ShmCommunicator::BarrierPhase(bool check_signature) {
  ++phase_;
  segment_->control(rank_).phase.store(phase_, std::memory_order_release);
  for (uint32_t q = 1; q < size_; ++q) WaitForRank((rank_ + q) % size_, phase_);
  if (!check_signature) return;
  const Signature& mine = segment_->control(rank_).signature[(sequence_ - 1) % 2];
  for (uint32_t q = 1; q < size_; ++q) {
    const uint32_t other = (rank_ + q) % size_;
    const Signature& theirs = segment_->control(other).signature[(sequence_ - 1) % 2];
    if (theirs == mine) continue;
    auto describe = [](const Signature& s) {
      std::string text = std::string(sdk::SignatureCodeName(s.op)) + " #" +
                         std::to_string(s.sequence) + " of " + std::to_string(s.count) + " " +
                         sdk::DtypeName(s.dtype);
      if (s.op == kAllReduce || s.op == kReduceScatter)
        text += std::string(" ") + sdk::ReduceOpName(s.reduce);
      if (s.op == kBroadcast) text += " from rank " + std::to_string(s.root);
      return text;
    };
    Fail(CHORUS_INVALID_ARGUMENT, "shm: collective mismatch: rank ", rank_, " issues ",
         describe(mine), " but rank ", other, " issues ", describe(theirs),
         "; every rank must issue the same operations with the same sizes and dtypes");
  }
}

void ShmCommunicator::AllReduce(const chorus_all_reduce_args& a) {
  const size_t element = ElementBytes(a.dtype, "shm all_reduce");
  sdk::RequireReduceOp(a.op, "shm all_reduce");
  RequireData(a.send, a.count, "shm all_reduce", "send");
  RequireData(a.recv, a.count, "shm all_reduce", "recv");
  Begin(kAllReduce, a.count, a.dtype, a.op, 0);
  const auto* send = static_cast<const unsigned char*>(a.send);
  auto* recv = static_cast<unsigned char*>(a.recv);
  if (a.count == 0) return BarrierPhase(true);
  const unsigned char* inputs[kMaxReduceInputs];
  const size_t bytes = a.count * element;
  if (bytes <= kOneBarrierBytes && bytes <= segment_->chunk_bytes() && size_ <= kMaxReduceInputs) {
    const uint32_t which = round_ % 2;
    std::memcpy(segment_->buffer(rank_, which), send, bytes);
    BarrierPhase(true);
    for (uint32_t q = 0; q < size_; ++q) inputs[q] = segment_->buffer(q, which);
    ReduceMany(recv, {inputs, size_}, a.count, element, a.dtype, a.op);
    ++round_;
    return;
  }
  const size_t per_round = segment_->chunk_bytes() / element;
  // Out of place, a result larger than the caches goes to memory with streaming stores: a plain
  // store first reads every line of recv from memory, a third of the memory traffic of a large
  // all_reduce. While every rank's input and result fit in the last-level cache beside the
  // segment's buffers, plain stores keep them there (streaming them at 4 MiB with 2 ranks cost a
  // third of the bandwidth). In place, each round has just read the lines of recv it writes (as
  // its input), so they are in the cache: streaming would only evict them (1.3x slower at 16 and
  // 64 MiB with 2 ranks).
  const size_t segment_bytes = 2 * size_t{size_} * segment_->chunk_bytes();
  const bool streaming = send != recv && bytes * 2 * size_ + segment_bytes > LastLevelCacheBytes();
  bool first = true;
  for (size_t offset = 0; offset < a.count; offset += per_round) {
    const size_t n = std::min(per_round, a.count - offset);
    const uint32_t which = round_ % 2;
    unsigned char* mine = segment_->buffer(rank_, which);
    const unsigned char* input = send + offset * element;
    // The others read every slice of this rank's piece but its own: this rank reduces its own
    // slice from its input directly, which saves copying 1/size of the data in.
    const auto [begin, end] = SliceOf(rank_, size_, n);
    std::memcpy(mine, input, begin * element);
    std::memcpy(mine + end * element, input + end * element, (n - end) * element);
    BarrierPhase(first);
    first = false;
    if (end > begin) {
      if (size_ <= kMaxReduceInputs) {
        inputs[0] = input + begin * element;
        for (uint32_t q = 1; q < size_; ++q) {
          inputs[q] = segment_->buffer((rank_ + q) % size_, which) + begin * element;
        }
        // This rank's slice of the result goes to recv too while it is in the L1 cache.
        ReduceMany(mine + begin * element, {inputs, size_}, end - begin, element, a.dtype, a.op,
                   recv + (offset + begin) * element, streaming);
      } else {
        std::memcpy(mine + begin * element, input + begin * element, (end - begin) * element);
        for (uint32_t q = 1; q < size_; ++q) {
          sdk::ReduceOnHost(mine + begin * element, mine + begin * element,
                            segment_->buffer((rank_ + q) % size_, which) + begin * element,
                            end - begin, a.dtype, a.op);
        }
      }
    }
    if (size_ > 1) BarrierPhase(false);
    for (uint32_t q = 0; q < size_; ++q) {
      const auto [b, e] = SliceOf(q, size_, n);
      if (e > b && (q != rank_ || size_ > kMaxReduceInputs)) {
        CopyOut(recv + (offset + b) * element, segment_->buffer(q, which) + b * element,
                (e - b) * element, streaming);
      }
    }
    ++round_;
  }
  if (streaming) StoreFence();
}

void ShmCommunicator::Broadcast(const chorus_collective_broadcast_args& a) {
  const size_t element = ElementBytes(a.dtype, "shm broadcast");
  RequireData(a.data, a.count, "shm broadcast", "data");
  if (a.root < 0 || static_cast<uint32_t>(a.root) >= size_) {
    Fail(CHORUS_INVALID_ARGUMENT, "shm broadcast: root ", a.root, " is not a rank of ", size_);
  }
  Begin(kBroadcast, a.count, a.dtype, CHORUS_REDUCE_SUM, a.root);
  auto* data = static_cast<unsigned char*>(a.data);
  const uint32_t root = static_cast<uint32_t>(a.root);
  const size_t per_round = segment_->chunk_bytes() / element;
  bool first = true;
  if (a.count == 0) BarrierPhase(true);
  for (size_t offset = 0; offset < a.count; offset += per_round) {
    const size_t bytes = std::min(per_round, a.count - offset) * element;
    const uint32_t which = round_ % 2;
    if (rank_ == root) std::memcpy(segment_->buffer(root, which), data + offset * element, bytes);
    BarrierPhase(first);
    first = false;
    if (rank_ != root) std::memcpy(data + offset * element, segment_->buffer(root, which), bytes);
    ++round_;
  }
}

void ShmCommunicator::AllGather(const chorus_collective_all_gather_args& a) {
  const size_t element = ElementBytes(a.dtype, "shm all_gather");
  RequireData(a.send, a.count, "shm all_gather", "send");
  RequireData(a.recv, a.count, "shm all_gather", "recv");
  Begin(kAllGather, a.count, a.dtype, CHORUS_REDUCE_SUM, 0);
  const auto* send = static_cast<const unsigned char*>(a.send);
  auto* recv = static_cast<unsigned char*>(a.recv);
  const size_t per_round = segment_->chunk_bytes() / element;
  bool first = true;
  if (a.count == 0) BarrierPhase(true);
  for (size_t offset = 0; offset < a.count; offset += per_round) {
    const size_t bytes = std::min(per_round, a.count - offset) * element;
    const uint32_t which = round_ % 2;
    std::memcpy(segment_->buffer(rank_, which), send + offset * element, bytes);
    BarrierPhase(first);
    first = false;
    for (uint32_t q = 0; q < size_; ++q) {
      std::memcpy(recv + (q * a.count + offset) * element, segment_->buffer(q, which), bytes);
    }
    ++round_;
  }
}

void ShmCommunicator::ReduceScatter(const chorus_reduce_scatter_args& a) {
  const size_t element = ElementBytes(a.dtype, "shm reduce_scatter");
  sdk::RequireReduceOp(a.op, "shm reduce_scatter");
  RequireData(a.send, a.recv_count, "shm reduce_scatter", "send");
  RequireData(a.recv, a.recv_count, "shm reduce_scatter", "recv");
  Begin(kReduceScatter, a.recv_count, a.dtype, a.op, 0);
  const auto* send = static_cast<const unsigned char*>(a.send);
  auto* recv = static_cast<unsigned char*>(a.recv);
  // A round carries the same piece of every block: n elements of each of size_ blocks.
  const size_t per_round = std::max<size_t>(1, segment_->chunk_bytes() / (element * size_));
  bool first = true;
  if (a.recv_count == 0) BarrierPhase(true);
  for (size_t offset = 0; offset < a.recv_count; offset += per_round) {
    const size_t n = std::min(per_round, a.recv_count - offset);
    const uint32_t which = round_ % 2;
    unsigned char* mine = segment_->buffer(rank_, which);
    // Every block but this rank's own goes in; its own it reduces from its input directly.
    for (uint32_t q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      std::memcpy(mine + q * n * element, send + (q * a.recv_count + offset) * element,
                  n * element);
    }
    BarrierPhase(first);
    first = false;
    unsigned char* out = recv + offset * element;
    const unsigned char* own = send + (rank_ * a.recv_count + offset) * element;
    if (size_ == 1) std::memcpy(out, own, n * element);
    for (uint32_t q = 1; q < size_; ++q) {
      const uint32_t other = (rank_ + q) % size_;
      sdk::ReduceOnHost(out, q == 1 ? own : out,
                        segment_->buffer(other, which) + rank_ * n * element, n, a.dtype, a.op);
    }
    ++round_;
  }
}

void ShmCommunicator::Barrier() {
  Begin(kBarrier, 0, CHORUS_U8, CHORUS_REDUCE_SUM, 0);
  BarrierPhase(true);
}

}  // namespace chorus::shm
