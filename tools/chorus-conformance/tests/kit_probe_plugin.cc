// A collective for testing the conformance kit itself
// (tools/chorus-conformance/tests/CMakeLists.txt): every operation goes through the rendezvous
// store (each rank puts its buffer under the operation's sequence number and reads the others'), so
// it works for ranks as threads and as processes alike. Its capabilities declare every operation on
// host memory, but all_gather answers UNSUPPORTED: the kit must skip that without --require and
// fail it with --require. Built with KIT_PROBE_BAD_SCORE, its score leaves 0..CHORUS_SCORE_MAX and
// changes from call to call, which the kit's Negotiation checks must catch; with
// KIT_PROBE_ZERO_SCORE it scores 0 everywhere, which the kit notes (AUTO never picks it).
#include <chorus/plugin.h>

#include <atomic>
#include <chorus/host_collective.hpp>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <string>
#include <vector>

namespace {

using chorus::sdk::Fail;

class StoreCommunicator {
 public:
  explicit StoreCommunicator(const chorus_communicator_create_args& args)
      : store_(args.store), rank_(args.rank), size_(args.size), timeout_ms_(args.timeout_ms) {
    if (store_ == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "kit_probe create: store is NULL");
    if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
      Fail(CHORUS_INVALID_ARGUMENT, "kit_probe create: rank ", rank_, " of size ", size_);
    }
    if (timeout_ms_ <= 0) Fail(CHORUS_INVALID_ARGUMENT, "kit_probe create: timeout_ms <= 0");
  }

  void AllReduce(const chorus_all_reduce_args& a) {
    const size_t bytes = Bytes(a.dtype, a.count, a.op, "all_reduce");
    if (a.count > 0 && (a.send == nullptr || a.recv == nullptr)) {
      Fail(CHORUS_INVALID_ARGUMENT, "kit_probe all_reduce: send or recv is NULL");
    }
    const auto all = Exchange(a.send, bytes);
    std::vector<unsigned char> sum = all[0];
    for (int r = 1; r < size_; ++r) {
      chorus::sdk::ReduceOnHost(sum.data(), sum.data(), all[static_cast<size_t>(r)].data(), a.count,
                                a.dtype, a.op);
    }
    if (bytes > 0) std::memcpy(a.recv, sum.data(), bytes);
  }

  void Broadcast(const chorus_collective_broadcast_args& a) {
    const size_t bytes = Bytes(a.dtype, a.count, CHORUS_REDUCE_SUM, "broadcast");
    if (a.root < 0 || a.root >= size_) Fail(CHORUS_INVALID_ARGUMENT, "kit_probe broadcast: root");
    if (a.count > 0 && a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "kit_probe: data NULL");
    const auto all = Exchange(a.data, rank_ == a.root ? bytes : 0);
    if (bytes > 0) std::memcpy(a.data, all[static_cast<size_t>(a.root)].data(), bytes);
  }

  // Declared in the capabilities, not implemented: what --require is there to catch.
  void AllGather(const chorus_collective_all_gather_args&) {
    Fail(CHORUS_UNSUPPORTED, "kit_probe all_gather is not implemented (although declared)");
  }

  void ReduceScatter(const chorus_reduce_scatter_args& a) {
    const size_t block = Bytes(a.dtype, a.recv_count, a.op, "reduce_scatter");
    if (a.recv_count > 0 && (a.send == nullptr || a.recv == nullptr)) {
      Fail(CHORUS_INVALID_ARGUMENT, "kit_probe reduce_scatter: send or recv is NULL");
    }
    const auto all = Exchange(a.send, block * static_cast<size_t>(size_));
    std::vector<unsigned char> sum(block);
    const size_t own = static_cast<size_t>(rank_) * block;
    if (block > 0) std::memcpy(sum.data(), all[0].data() + own, block);
    for (int r = 1; r < size_; ++r) {
      chorus::sdk::ReduceOnHost(sum.data(), sum.data(), all[static_cast<size_t>(r)].data() + own,
                                a.recv_count, a.dtype, a.op);
    }
    if (block > 0) std::memcpy(a.recv, sum.data(), block);
  }

  void Barrier() { Exchange(nullptr, 0); }

  void Abort() { aborted_.store(true); }

 private:
  static size_t Bytes(chorus_dtype dtype, size_t count, chorus_reduce_op op, const char* what) {
    chorus::sdk::RequireDtype(dtype, what);
    chorus::sdk::RequireReduceOp(op, what);
    return count * chorus_dtype_size(dtype);
  }

  std::string Key(uint64_t sequence, int rank) const {
    return std::to_string(sequence) + "/" + std::to_string(rank);
  }

  // Puts `bytes` of `data` for this operation and returns every rank's, by rank. Once this rank
  // has everyone's buffer of operation n, every rank has finished reading operation n - 1, so
  // this rank's key of n - 1 goes.
  std::vector<std::vector<unsigned char>> Exchange(const void* data, size_t bytes) {
    ThrowIfAborted();
    const uint64_t sequence = sequence_++;
    const unsigned char nothing = 0;
    Check(
        store_->set(store_->ctx, Key(sequence, rank_).c_str(), bytes > 0 ? data : &nothing, bytes),
        "set");
    std::vector<std::vector<unsigned char>> all(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) all[static_cast<size_t>(r)] = Await(Key(sequence, r));
    if (sequence > 0) store_->remove(store_->ctx, Key(sequence - 1, rank_).c_str());
    return all;
  }

  // The value of `key`, waited for in short slices so that an abort ends the wait.
  std::vector<unsigned char> Await(const std::string& key) {
    constexpr int64_t kSliceMs = 50;
    std::vector<unsigned char> value(1);
    for (int64_t waited = 0;; waited += kSliceMs) {
      size_t size = 0;
      const chorus_status status =
          store_->get(store_->ctx, key.c_str(), kSliceMs, value.data(), value.size(), &size);
      if (status == CHORUS_OK) {
        if (size <= value.size()) {
          value.resize(size);
          return value;
        }
        value.resize(size);  // larger than the buffer: read it again whole
        Check(store_->get(store_->ctx, key.c_str(), kSliceMs, value.data(), size, &size), "get");
        return value;
      }
      if (status != CHORUS_TIMEOUT) Check(status, "get");
      ThrowIfAborted();
      if (waited >= timeout_ms_) {
        Fail(CHORUS_TIMEOUT, "kit_probe: ", key, " did not come within ", timeout_ms_, " ms");
      }
    }
  }

  void ThrowIfAborted() const {
    if (aborted_.load()) Fail(CHORUS_ABORTED, "kit_probe: the communicator was aborted");
  }

  static void Check(chorus_status status, const char* what) {
    if (status != CHORUS_OK) Fail(status, "kit_probe: the store's ", what, " failed");
  }

  const chorus_kv_store* store_;
  int rank_, size_;
  int64_t timeout_ms_;
  uint64_t sequence_ = 0;
  std::atomic<bool> aborted_{false};
};

#if defined(KIT_PROBE_BAD_SCORE)
// Above CHORUS_SCORE_MAX for large buffers, and different on every call.
uint32_t Score(const chorus_score_args* args) {
  static std::atomic<uint32_t> calls{0};
  return args->bytes > (1u << 20) ? CHORUS_SCORE_MAX + 1 : calls++ % 7;
}
#elif defined(KIT_PROBE_ZERO_SCORE)
// Never chosen by AUTO: the kit passes it with a note.
uint32_t Score(const chorus_score_args*) { return 0; }
#else
uint32_t Score(const chorus_score_args*) { return 1; }
#endif

const chorus_capabilities kCapabilities = chorus::sdk::Capabilities(
    chorus::sdk::kHostMemory, CHORUS_SHAPE_ANY, chorus::sdk::kAllCollectiveOps, Score);

}  // namespace

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  chorus::sdk::HostCollectivePluginInfo info;
  info.plugin_name = KIT_PROBE_NAME;
  info.version = "1.0.0";
  info.description = "a store-only collective for testing the conformance kit";
  info.capabilities = &kCapabilities;
  return chorus::sdk::HostCollectivePlugin<StoreCommunicator>(info);
}
