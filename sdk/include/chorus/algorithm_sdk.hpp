// Header-only helpers for writing an algorithm (plugin.h interface 4): the checks every run()
// makes, a group of point-to-point requests that are waited for and freed whatever happens, and
// the split of a buffer into blocks that collectives share out among ranks. Built on
// plugin_sdk.hpp (Fail, Guard); nothing here talks to the core except through the chorus_p2p the
// core hands run().
#ifndef CHORUS_ALGORITHM_SDK_HPP_
#define CHORUS_ALGORITHM_SDK_HPP_

#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::sdk {

// The checks of a run's arguments, as the core's ring makes them: a usable p2p, a known op, a
// dtype and reduce op the core's kernels know, a root that is a rank, buffers where data moves,
// and a count whose bytes (times the ranks, for all_gather and reduce_scatter) fit. `name`
// starts every message ("rhd").
inline void ValidateRunArgs(const chorus_algorithm_run_args& a, const char* name) {
  const chorus_p2p* p2p = a.p2p;
  if (p2p == nullptr || p2p->struct_size < CHORUS_STRUCT_SIZE(chorus_p2p, free) || !p2p->isend ||
      !p2p->irecv || !p2p->wait || !p2p->test || !p2p->free) {
    Fail(CHORUS_INVALID_ARGUMENT, name, ": the p2p table is NULL, too small or lacks a function");
  }
  if (p2p->size < 1 || p2p->rank < 0 || p2p->rank >= p2p->size) {
    Fail(CHORUS_INVALID_ARGUMENT, name, ": p2p rank ", p2p->rank, " of size ", p2p->size,
         " is not a valid rank");
  }
  if (a.op < CHORUS_OP_ALL_REDUCE || a.op > CHORUS_OP_BARRIER) {
    Fail(CHORUS_INVALID_ARGUMENT, name, ": unknown collective op ", static_cast<int>(a.op));
  }
  if (a.op == CHORUS_OP_BARRIER) return;
  RequireDtype(a.dtype, name);
  if (a.op == CHORUS_OP_ALL_REDUCE || a.op == CHORUS_OP_REDUCE_SCATTER) {
    RequireReduceOp(a.op_reduce, name);
  }
  if (a.op == CHORUS_OP_BROADCAST && (a.root < 0 || a.root >= p2p->size)) {
    Fail(CHORUS_INVALID_ARGUMENT, name, " broadcast: root ", a.root, " is not a rank of ",
         p2p->size);
  }
  const size_t ranks = static_cast<size_t>(p2p->size);
  if (a.count > SIZE_MAX / chorus_dtype_size(a.dtype) / ranks) {
    Fail(CHORUS_INVALID_ARGUMENT, name, ": count ", a.count, " is too large");
  }
  if (a.count > 0 && ((a.op != CHORUS_OP_BROADCAST && a.send == nullptr) || a.recv == nullptr)) {
    Fail(CHORUS_INVALID_ARGUMENT, name, ": send or recv is NULL");
  }
}

// Sends and receives started together and waited for together. Whatever happens, the destructor
// waits for and frees every request still live: after a failure the core's p2p has aborted its
// endpoint, so they finish at once, and no transport writes into a buffer the algorithm frees.
class P2pRequests {
 public:
  // `name` starts every message; timeout_ms is the run's.
  P2pRequests(const chorus_p2p& p2p, const char* name, int64_t timeout_ms)
      : p2p_(p2p), name_(name), timeout_ms_(timeout_ms) {}
  ~P2pRequests() {
    for (chorus_p2p_request* request : live_) {
      p2p_.wait(p2p_.ctx, request, timeout_ms_);
      p2p_.free(p2p_.ctx, request);
    }
  }
  P2pRequests(const P2pRequests&) = delete;
  P2pRequests& operator=(const P2pRequests&) = delete;

  void Send(int peer, uint64_t tag, const void* data, size_t bytes) {
    Start(p2p_.isend, peer, tag, const_cast<void*>(data), bytes, "send to");
  }
  void Receive(int peer, uint64_t tag, void* data, size_t bytes) {
    Start(p2p_.irecv, peer, tag, data, bytes, "receive from");
  }
  // Waits for every request, oldest first; throws the first failure.
  void WaitAll() {
    for (size_t i = 0; i < live_.size(); ++i) {
      const chorus_status status = p2p_.wait(p2p_.ctx, live_[i], timeout_ms_);
      if (status != CHORUS_OK) {
        // The requests from i on stay live for the destructor.
        live_.erase(live_.begin(), live_.begin() + static_cast<std::ptrdiff_t>(i));
        Fail(status, name_, ": rank ", p2p_.rank, ": a ", what_[i], " rank ", peers_[i],
             " failed (", chorus::StatusName(status), ")", TransportWords());
      }
      p2p_.free(p2p_.ctx, live_[i]);
    }
    live_.clear();
    what_.clear();
    peers_.clear();
  }
  size_t live() const { return live_.size(); }

 private:
  using StartFunction = chorus_status (*)(void*, const chorus_p2p_args*, chorus_p2p_request**);
  // ": <the transport's message>" from chorus_p2p.last_error (ABI 1.6), or "" under an older
  // core or when it has none.
  std::string TransportWords() const {
    if (!CHORUS_HAS_FIELD(&p2p_, chorus_p2p, last_error) || p2p_.last_error == nullptr) return "";
    const char* words = p2p_.last_error(p2p_.ctx);
    return words == nullptr || *words == '\0' ? "" : std::string(": ") + words;
  }
  void Start(StartFunction start, int peer, uint64_t tag, void* data, size_t bytes,
             const char* what) {
    chorus_p2p_args args{};
    args.struct_size = sizeof(args);
    args.peer = peer;
    args.tag = tag;
    args.data = data;
    args.bytes = bytes;
    chorus_p2p_request* request = nullptr;
    // Room first, so that nothing can throw between the start and the push_back.
    live_.reserve(live_.size() + 1);
    what_.reserve(what_.size() + 1);
    peers_.reserve(peers_.size() + 1);
    const chorus_status status = start(p2p_.ctx, &args, &request);
    if (status != CHORUS_OK) {
      Fail(status, name_, ": rank ", p2p_.rank, ": could not start the ", what, " rank ", peer,
           " (", chorus::StatusName(status), ")", TransportWords());
    }
    live_.push_back(request);
    what_.push_back(what);
    peers_.push_back(peer);
  }

  const chorus_p2p& p2p_;
  const char* name_;
  const int64_t timeout_ms_;
  std::vector<chorus_p2p_request*> live_;
  std::vector<const char*> what_;
  std::vector<int> peers_;
};

// `count` elements cut into `blocks` blocks as evenly as they go: the first count % blocks
// blocks get one more element. Blocks may be empty (count < blocks).
struct BlockLayout {
  size_t count = 0;
  size_t blocks = 1;
  size_t Begin(size_t block) const {
    const size_t base = count / blocks, extra = count % blocks;
    return block * base + (block < extra ? block : extra);
  }
  size_t Size(size_t block) const { return count / blocks + (block < count % blocks ? 1 : 0); }
  // Elements of blocks [first, first + n).
  size_t SizeOf(size_t first, size_t n) const { return Begin(first + n) - Begin(first); }
};

}  // namespace chorus::sdk

#endif  // CHORUS_ALGORITHM_SDK_HPP_
