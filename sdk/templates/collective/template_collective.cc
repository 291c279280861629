// template_collective.cc: the smallest real collective plugin (plugin.h interface 3), for vendors
// to copy. It moves every operation's data through the rendezvous store the core hands each
// communicator (chorus_kv_store), on host memory: all_reduce (SUM, PROD, MIN, MAX; MEAN is the
// core's), broadcast, all_gather, reduce_scatter and barrier, for every dtype. Slow (every byte
// goes through the store) but complete, so it passes chorus-conformance as it is; put your
// library's calls in the methods of StoreCommunicator and keep the argument checks.
//
// Rename it: chorus_add_plugin(NAME ...) in CMakeLists.txt, .plugin_name below (it must match the
// file name libchorus-<name>.so) and .collective_name (what CHORUS_COMMUNICATION=<name> selects).
// Run the kit (ranks as threads, then 2, 3 and 4 ranks as processes through chorus-launch):
//   chorus-conformance --plugin build/libchorus-template_collective.so --require
//
// sdk::HostCollectivePlugin (host_collective.hpp) fills the whole plugin table around the class:
// it checks handles, out-pointers, struct sizes and streams, and turns exceptions into statuses.
#include <chorus/plugin.h>

#include <algorithm>
#include <atomic>
#include <chorus/host_collective.hpp>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>

namespace {

using chorus::sdk::Fail;

// count elements of dtype in bytes, times `blocks`; refuses an unknown dtype and an overflow.
size_t Bytes(size_t count, chorus_dtype dtype, size_t blocks, const char* what) {
  chorus::sdk::RequireDtype(dtype, what);
  const size_t element = chorus_dtype_size(dtype);
  if (count > SIZE_MAX / element / blocks) Fail(CHORUS_INVALID_ARGUMENT, what, ": count too large");
  return count * element * blocks;
}

void RequireData(const void* data, size_t bytes, const char* what, const char* name) {
  if (bytes > 0 && data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": ", name, " is NULL");
}

std::string Blob(const void* data, size_t bytes) {
  return bytes == 0 ? std::string() : std::string(static_cast<const char*>(data), bytes);
}

// Every rank passes the same count and dtype (plugin.h); a different one shows as another size.
void ExpectSize(const std::string& blob, size_t bytes, int from, const char* what) {
  if (blob.size() != bytes) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": rank ", from, " contributed ", blob.size(),
         " bytes, this rank expects ", bytes, " (every rank must pass the same count and dtype)");
  }
}

// One rank's communicator. Operation n (counted per communicator: the n-th call on every rank is
// the same operation) is one exchange through the store: each rank writes its contribution under
// "op/<n>/<rank>", then reads every peer's. Every operation reads every peer's key, broadcast and
// barrier too (their contributions may be empty), which makes the clean-up rule safe:
//   after finishing operation n a rank removes its own key of operation n-1: every peer has then
//   finished n-1, since it wrote its key of n only after that.
// The last operation's keys stay: destroy does not wait for the peers to read them, because the
// core's store outlives every communicator of the job.
class StoreCommunicator {
 public:
  explicit StoreCommunicator(const chorus_communicator_create_args& args)
      : rank_(args.rank), size_(args.size), timeout_ms_(args.timeout_ms), store_(args.store) {
    if (args.size < 1 || args.rank < 0 || args.rank >= args.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "template_collective create: rank ", args.rank, " of size ",
           args.size, " is not a rank");
    }
    if (args.timeout_ms <= 0) Fail(CHORUS_INVALID_ARGUMENT, "template_collective: timeout_ms <= 0");
    if (args.devices_api != nullptr) {
      Fail(CHORUS_UNSUPPORTED, "template_collective works on host memory only, not on '",
           args.devices_api->platform, "' devices");
    }
  }

  void AllReduce(const chorus_all_reduce_args& a) {
    const char* what = "template_collective all_reduce";
    const size_t bytes = Bytes(a.count, a.dtype, 1, what);
    chorus::sdk::RequireReduceOp(a.op, what);
    RequireData(a.send, bytes, what, "send");
    RequireData(a.recv, bytes, what, "recv");
    // In rank order on every rank, so that every rank gets the same bits.
    Exchange(Blob(a.send, bytes), [&](int from, const std::string& blob) {
      ExpectSize(blob, bytes, from, what);
      if (from == 0) {
        if (bytes > 0) std::memcpy(a.recv, blob.data(), bytes);
      } else {
        chorus::sdk::ReduceOnHost(a.recv, a.recv, blob.data(), a.count, a.dtype, a.op);
      }
    });
  }

  void Broadcast(const chorus_collective_broadcast_args& a) {
    const char* what = "template_collective broadcast";
    const size_t bytes = Bytes(a.count, a.dtype, 1, what);
    RequireData(a.data, bytes, what, "data");
    if (a.root < 0 || a.root >= size_) {
      Fail(CHORUS_INVALID_ARGUMENT, what, ": root ", a.root, " is not a rank of ", size_);
    }
    const bool root = a.root == rank_;
    Exchange(root ? Blob(a.data, bytes) : std::string(), [&](int from, const std::string& blob) {
      if (root || from != a.root) return;  // the other ranks' keys are empty
      ExpectSize(blob, bytes, from, what);
      if (bytes > 0) std::memcpy(a.data, blob.data(), bytes);
    });
  }

  void AllGather(const chorus_collective_all_gather_args& a) {
    const char* what = "template_collective all_gather";
    const size_t block = Bytes(a.count, a.dtype, 1, what);
    RequireData(a.send, block, what, "send");
    RequireData(a.recv, Bytes(a.count, a.dtype, size_, what), what, "recv");
    Exchange(Blob(a.send, block), [&](int from, const std::string& blob) {
      ExpectSize(blob, block, from, what);
      if (block > 0) std::memcpy(static_cast<char*>(a.recv) + from * block, blob.data(), block);
    });
  }

  void ReduceScatter(const chorus_reduce_scatter_args& a) {
    const char* what = "template_collective reduce_scatter";
    const size_t block = Bytes(a.recv_count, a.dtype, 1, what);
    const size_t total = Bytes(a.recv_count, a.dtype, size_, what);
    chorus::sdk::RequireReduceOp(a.op, what);
    RequireData(a.send, total, what, "send");
    RequireData(a.recv, block, what, "recv");
    // Each rank writes its whole send buffer and reduces block `rank` of every rank's.
    Exchange(Blob(a.send, total), [&](int from, const std::string& blob) {
      ExpectSize(blob, total, from, what);
      const char* mine = blob.data() + rank_ * block;
      if (from == 0) {
        if (block > 0) std::memcpy(a.recv, mine, block);
      } else {
        chorus::sdk::ReduceOnHost(a.recv, a.recv, mine, a.recv_count, a.dtype, a.op);
      }
    });
  }

  void Barrier() {
    Exchange(std::string(), [](int, const std::string&) {});
  }

  // From any thread: the wait in GetUnlessAborted sees the flag within its 50 ms slice.
  void Abort() { aborted_ = true; }

 private:
  // Writes this rank's contribution to operation n, then hands every rank's (its own included)
  // to `take`, in rank order. One time-out for the whole operation.
  void Exchange(const std::string& mine,
                const std::function<void(int from, const std::string& blob)>& take) {
    if (aborted_) Fail(CHORUS_ABORTED, "template_collective: the communicator was aborted");
    const uint64_t n = next_op_++;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
    store_.Set(Key(n, rank_), mine);
    for (int from = 0; from < size_; ++from) {
      if (from == rank_) {
        take(from, mine);
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      take(from,
           store_.GetUnlessAborted(Key(n, from), std::max<int64_t>(0, left.count()), &aborted_));
    }
    if (n > 0) store_.Remove(Key(n - 1, rank_));  // the clean-up rule above
  }

  static std::string Key(uint64_t n, int rank) {
    return "op/" + std::to_string(n) + "/" + std::to_string(rank);
  }

  const int rank_, size_;
  const int64_t timeout_ms_;
  const chorus::sdk::StoreView store_;  // borrowed: lives until destroy returns
  uint64_t next_op_ = 0;
  std::atomic<bool> aborted_{false};
};

// The reduce kernel is a host service: refuse to load without it rather than fail mid-job.
void RequireReduceKernel(const chorus_host& host) {
  if (!CHORUS_HAS_FIELD(&host, chorus_host, reduce_host) || host.reduce_host == nullptr) {
    Fail(CHORUS_UNSUPPORTED, "template_collective init: the core offers no reduce_host");
  }
}

// AUTO gives each operation to the highest score declared for it (plugin.h's bands, sdk/README.md
// section 5: 1-9 works everywhere, where the core's reference core_ring scores 5; 10-49 general
// purpose and faster; 50-89 specialists; 90-100 a vendor's library on its own hardware). This one
// works for any job shape on host memory but is slower than every real collective, so it scores
// 1: AUTO never prefers it, and only a name selects it (CHORUS_COMMUNICATION=template_collective);
// chorus-conformance and chorus-info say so. Raise it only where chorus-bench measured it faster,
// by operation, size and job shape. It is no ring and no NCCL: those requests get 0.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 1 : 0;
}
const chorus_capabilities kCapabilities = chorus::sdk::Capabilities(
    chorus::sdk::kHostMemory, CHORUS_SHAPE_ANY, chorus::sdk::kAllCollectiveOps, Score);

}  // namespace

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return chorus::sdk::HostCollectivePlugin<StoreCommunicator>({
      .plugin_name = "template_collective",
      .version = "1.1.0",
      .description = "SDK template: a collective that moves data through the rendezvous store",
      .collective_name = "template_collective",
      .capabilities = &kCapabilities,
      .check_host = RequireReduceKernel,
  });
}
