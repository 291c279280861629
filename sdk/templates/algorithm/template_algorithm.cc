// template_algorithm.cc: the smallest real algorithm plugin (plugin.h interface 4), for vendors to
// copy. An algorithm is a collective written against point-to-point operations: the core hands
// run() a chorus_p2p over a transport (its own tcp, or a transport plugin's) and the core's
// reduce kernel. This one, "direct", is the plainest there is: every rank exchanges data with
// every other rank at once.
//  - all_reduce: each rank sends its whole buffer to every peer and reduces locally;
//  - broadcast: the root sends to all;
//  - all_gather: each rank sends its block to all;
//  - reduce_scatter: each rank sends block r of its buffer to rank r and reduces what it gets;
//  - barrier: a zero-byte message to and from every peer.
// Reductions run in rank order on every rank, so every rank gets the same bits. It passes
// chorus-conformance as it is; replace the bodies of the operations with your schedule (a tree,
// recursive doubling) and keep the argument checks.
//
// Rename it: chorus_add_plugin(NAME ...) in CMakeLists.txt, the plugin's name in sdk::PluginTable
// below (it must match the file name libchorus-<name>.so) and the algorithm's name ("direct";
// unique among the algorithms the core loads).
// Run the kit (over the core's tcp transport; --transport adds a transport plugin's):
//   chorus-conformance --plugin build/libchorus-template_algorithm.so --require
#include <chorus/plugin.h>

#include <chorus/algorithm_sdk.hpp>  // ValidateRunArgs, P2pRequests
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <vector>

namespace {

using chorus::sdk::Fail;

// Tags tell the operations apart (a rank running another operation fails on a size mismatch or
// times out, rather than mixing data); the high byte marks this algorithm's messages.
constexpr uint64_t kTagBase = uint64_t{0x44} << 56;  // 'D'

constexpr uint32_t kSupportedOps =
    CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) | CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
    CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER) | CHORUS_OP_BIT(CHORUS_OP_REDUCE_SCATTER) |
    CHORUS_OP_BIT(CHORUS_OP_BARRIER);

// Scratch memory of the calling thread, at least `bytes` long, kept for its next runs. A fresh
// buffer per run paid a page fault for every 4 KiB page it touched: most of a 16 MiB all-reduce's
// time. Per thread, because the core calls run() concurrently on different p2p contexts (one per
// communicator), each run on its own thread from start to end: a thread never runs two at once,
// so its buffer needs no lock. It grows to the largest run of the thread and is freed when the
// thread ends (glibc keeps the library mapped until then, even past a dlclose).
char* Scratch(size_t bytes) {
  thread_local std::vector<char> scratch;
  if (scratch.size() < bytes) scratch.resize(bytes);  // never shrinks: no refill on the way back
  return scratch.data();
}

// recv = operands[0] op operands[1] op ... (`ranks` blocks of count elements, in rank order).
void ReduceInRankOrder(void* recv, const char* operands, int ranks,
                       const chorus_algorithm_run_args& a) {
  const size_t bytes = a.count * chorus_dtype_size(a.dtype);
  std::memcpy(recv, operands, bytes);
  for (int r = 1; r < ranks; ++r) {
    chorus::sdk::ReduceOnHost(recv, recv, operands + r * bytes, a.count, a.dtype, a.op_reduce);
  }
}

void Run(const chorus_algorithm_run_args& a) {
  const chorus_p2p& p2p = *a.p2p;
  const int rank = p2p.rank, size = p2p.size;
  // Every request of the run; the destructor waits for and frees what a failure left. A failed
  // call's error quotes the transport's own message (chorus_p2p.last_error, ABI 1.6: which peer,
  // and why) where the core has it.
  chorus::sdk::P2pRequests requests(p2p, "direct", a.timeout_ms);
  const uint64_t tag = kTagBase | static_cast<uint64_t>(a.op);
  if (a.op == CHORUS_OP_BARRIER) {
    // Every rank leaves after hearing from every other, each of which wrote only on arrival.
    char token = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      requests.Receive(peer, tag, &token, 0);
      requests.Send(peer, tag, &token, 0);
    }
    requests.WaitAll();
    return;
  }
  if (a.count == 0) return;
  const size_t block = a.count * chorus_dtype_size(a.dtype);
  char* recv = static_cast<char*>(a.recv);
  const char* send = static_cast<const char*>(a.send);
  switch (a.op) {
    case CHORUS_OP_ALL_REDUCE:
    case CHORUS_OP_REDUCE_SCATTER: {
      // Every rank's operand for this rank's result, in rank order; this rank's own is copied in,
      // so the result may be written over send (in place) at the end.
      char* operands = Scratch(static_cast<size_t>(size) * block);
      const bool scatter = a.op == CHORUS_OP_REDUCE_SCATTER;
      std::memcpy(operands + rank * block, send + (scatter ? rank * block : 0), block);
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        requests.Receive(peer, tag, operands + peer * block, block);
        requests.Send(peer, tag, scatter ? send + peer * block : operands + rank * block, block);
      }
      requests.WaitAll();
      ReduceInRankOrder(recv, operands, size, a);
      return;
    }
    case CHORUS_OP_BROADCAST:
      if (rank != a.root) {
        requests.Receive(a.root, tag, recv, block);
      } else {
        for (int peer = 0; peer < size; ++peer) {
          if (peer != rank) requests.Send(peer, tag, recv, block);
        }
      }
      requests.WaitAll();
      return;
    default: {  // CHORUS_OP_ALL_GATHER; in place when send is block `rank` of recv
      char* mine = recv + rank * block;
      if (mine != send) std::memmove(mine, send, block);
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        requests.Receive(peer, tag, recv + peer * block, block);
        requests.Send(peer, tag, mine, block);
      }
      requests.WaitAll();
      return;
    }
  }
}

chorus_status RunTable(const chorus_algorithm_run_args* args) {
  return chorus::sdk::Guard([&] {
    const auto& a = chorus::sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_algorithm_run_args, num_options), "direct");
    chorus::sdk::ValidateRunArgs(a, "direct");
    Run(a);
  });
}

// The reduce kernel is a host service: refuse to load without it rather than fail mid-job.
void RequireReduceKernel(const chorus_host& host) {
  if (!CHORUS_HAS_FIELD(&host, chorus_host, reduce_host) || host.reduce_host == nullptr) {
    Fail(CHORUS_UNSUPPORTED, "template_algorithm init: the core offers no reduce_host");
  }
}

// ---- What it serves, and how well (ABI 1.3) ----------------------------------------------------
// The core makes a collective "direct@<transport>" of this algorithm and every transport loaded,
// and AUTO scores it direct's score x the transport's / 100 (plugin.h's bands, sdk/README.md
// section 5: 1-9 works everywhere, where the core's reference core_ring = ring@tcp scores 50 x 10
// / 100 = 5; 10-49 general purpose and faster; 50-89 specialists; 90-100 a vendor's library on its
// own hardware). direct sends every buffer to every peer, so it scores 1: its pairs round down to 0
// (1 x tcp's 10 / 100), AUTO never picks them and only a name selects one
// (CHORUS_COMMUNICATION=direct@tcp); chorus-conformance and chorus-info say so. Raise it only
// where chorus-bench measured your schedule faster (the core's ring scores 50 at every size), by
// operation, size and rank count. It is no ring and no NCCL: those requests get 0.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 1 : 0;
}
// Host memory (what the core hands every algorithm), any job shape, every operation it runs.
const chorus_capabilities kCapabilities =
    chorus::sdk::Capabilities(chorus::sdk::kHostMemory, CHORUS_SHAPE_ANY, kSupportedOps, Score);

const chorus_algorithm_api kAlgorithm = [] {
  chorus_algorithm_api t{};
  t.struct_size = sizeof(t);
  t.name = "direct";
  t.supported_ops = kSupportedOps;
  t.run = RunTable;
  t.capabilities = &kCapabilities;
  return t;
}();

const chorus_plugin kPlugin = [] {
  chorus_plugin t = chorus::sdk::PluginTable(
      "template_algorithm",  // must match the file name: libchorus-template_algorithm.so
      "1.1.0", "SDK template: a direct algorithm (every rank sends to every other)",
      RequireReduceKernel);
  t.algorithm = &kAlgorithm;
  return t;
}();

}  // namespace

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &kPlugin;
}
