// A collective for testing the conformance kit itself
// (tools/chorus-conformance/tests/CMakeLists.txt): every operation goes through the rendezvous
// store (each rank puts its buffer under the operation's sequence number and reads the others'), so
// it works for ranks as threads and as processes alike. Its capabilities declare every operation on
// host memory, but all_gather answers UNSUPPORTED: the kit must skip that without --require and
// fail it with --require. Built with KIT_PROBE_BAD_SCORE, its score leaves 0..CHORUS_SCORE_MAX and
// changes from call to call, which the kit's Negotiation checks must catch; with
// KIT_PROBE_ZERO_SCORE it scores 0 everywhere, which the kit notes (AUTO never picks it).
//
// Built with KIT_PROBE_TRANSPORT it is a transport instead ("probe"): the messages from one rank
// to another go through the store in the order sent, one key each. As is, it keeps plugin.h's
// transport rules. With KIT_PROBE_HEAD_OF_LINE it breaks T2 (receives in any order): a receive
// gets its message only when that message is the next one from its peer, whatever the tags (a
// stream without buffering), so a receive posted before those of the tags sent ahead of it waits
// for ever; with KIT_PROBE_ABORT_KEEPS_RECEIVES it breaks T5 (abort): abort() fails later calls
// but leaves pending receives pending. Both honour request_wait's time-out, so the kit's checks
// end at its --timeout (T2) or at the rule's 5 s (T5).
#include <chorus/plugin.h>

#include <algorithm>
#include <atomic>
#include <chorus/host_collective.hpp>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
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

#if defined(KIT_PROBE_TRANSPORT)
// ---- The transport variant ----------------------------------------------------------------------

// A send or a receive. A send completes in isend (the store holds its message from then on); a
// receive in request_wait or request_test.
struct chorus_request {
  chorus_transport_endpoint* endpoint = nullptr;
  bool done = false;
  chorus_status status = CHORUS_OK;
  std::string message;
  // Receives only: the peer and tag, and this receive's place among that pair's receives.
  int peer = 0;
  uint64_t tag = 0;
  uint64_t index = 0;
  void* data = nullptr;
  size_t bytes = 0;
};

// A message from rank `from` to rank `to` is the key "m/<from>/<to>/<n>" (n counts the messages
// of that pair, whatever their tags), its value "<tag> " then the bytes. "closed/<rank>": that
// endpoint sends nothing more.
struct chorus_transport_endpoint {
  explicit chorus_transport_endpoint(const chorus_transport_create_args& a)
      : rank(a.rank), size(a.size), store(a.store), peers(static_cast<size_t>(a.size)) {}

  struct Peer {
    uint64_t sent = 0;                                  // messages sent to it
    uint64_t taken = 0;                                 // messages from it taken from the store
    std::map<uint64_t, uint64_t> posted, received;      // receives by tag
    std::deque<std::pair<uint64_t, std::string>> held;  // taken, not yet received, in order
  };

  void Close() {
    if (closed.exchange(true)) return;
    try {
      store.Set("closed/" + std::to_string(rank), "");
    } catch (...) {
    }
  }

  static std::string Key(int from, int to, uint64_t n) {
    return "m/" + std::to_string(from) + "/" + std::to_string(to) + "/" + std::to_string(n);
  }

  // Moves the message for receive `r` into its buffer when it is here; whether it was.
  bool TakeHeld(chorus_request& r, Peer& p) {
    if (p.received[r.tag] != r.index) return false;  // an earlier receive of the tag goes first
    for (auto it = p.held.begin(); it != p.held.end(); ++it) {
#if defined(KIT_PROBE_HEAD_OF_LINE)
      if (it != p.held.begin()) break;  // only the next message from the peer
#endif
      if (it->first != r.tag) continue;
      const std::string bytes = std::move(it->second);
      p.held.erase(it);
      ++p.received[r.tag];
      if (bytes.size() != r.bytes) {
        Fail(CHORUS_INVALID_ARGUMENT, "kit_probe transport: rank ", r.peer, " sent ", bytes.size(),
             " bytes with tag ", r.tag, ", but rank ", rank, " receives ", r.bytes);
      }
      if (!bytes.empty()) std::memcpy(r.data, bytes.data(), bytes.size());
      return true;
    }
    return false;
  }

  // Tries to complete receive `r` for up to timeout_ms; whether it did. Throws its failure.
  bool Receive(chorus_request& r, int64_t timeout_ms) {
    constexpr int64_t kSliceMs = 20;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::lock_guard<std::mutex> lock(mutex);
    Peer& p = peers[static_cast<size_t>(r.peer)];
    for (;;) {
#if !defined(KIT_PROBE_ABORT_KEEPS_RECEIVES)
      if (aborted) Fail(CHORUS_ABORTED, "kit_probe transport: the endpoint was aborted");
#endif
      if (TakeHeld(r, p)) return true;
#if defined(KIT_PROBE_HEAD_OF_LINE)
      const bool may_take = p.held.empty();  // no buffering: one message in hand at a time
#else
      const bool may_take = true;
#endif
      if (may_take) {
        const std::string key = Key(r.peer, rank, p.taken);
        if (store.Contains(key)) {
          const std::string value = store.Get(key, 0);
          store.Remove(key);
          ++p.taken;
          const size_t space = value.find(' ');
          p.held.emplace_back(std::stoull(value.substr(0, space)), value.substr(space + 1));
          continue;
        }
        if (store.Contains("closed/" + std::to_string(r.peer)) && !store.Contains(key)) {
          Fail(CHORUS_PEER_LOST, "kit_probe transport: rank ", r.peer,
               " closed its endpoint without sending the message of tag ", r.tag, " that rank ",
               rank, " waits for");
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::min<int64_t>(kSliceMs, 1 + std::chrono::duration_cast<std::chrono::milliseconds>(
                                              deadline - std::chrono::steady_clock::now())
                                              .count())));
    }
  }

  const int rank, size;
  const chorus::sdk::StoreView store;
  std::vector<Peer> peers;
  std::mutex mutex;  // guards peers
  std::atomic<bool> aborted{false};
  std::atomic<bool> closed{false};
};

namespace {

using Endpoint = chorus_transport_endpoint;

const chorus_p2p_args& StartP2p(Endpoint* e, const chorus_p2p_args* args, chorus_request** out,
                                const char* what) {
  if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": request is NULL");
  *out = nullptr;
  if (e == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": endpoint is NULL");
  const auto& a = chorus::sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_p2p_args, bytes), what);
  if (a.peer < 0 || a.peer >= e->size || a.peer == e->rank) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": peer ", a.peer, " of ", e->size);
  }
  if (a.bytes > 0 && a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": data is NULL");
  if (e->aborted) Fail(CHORUS_ABORTED, what, ": the endpoint was aborted");
  return a;
}

chorus_status TransportCreate(const chorus_transport_create_args* args, Endpoint** out) {
  return chorus::sdk::Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "kit_probe create: out is NULL");
    *out = nullptr;
    const auto& a = chorus::sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_transport_create_args, num_options), "kit_probe create");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "kit_probe create: rank ", a.rank, " of size ", a.size);
    }
    *out = new Endpoint(a);
  });
}

void TransportDestroy(Endpoint* e) {
  if (e == nullptr) return;
  e->Close();
  delete e;  // requests still pending are the caller's to free; none touches the endpoint then
}

chorus_status Isend(Endpoint* e, const chorus_p2p_args* args, chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = StartP2p(e, args, request, "kit_probe isend");
    if (e->store.Contains("closed/" + std::to_string(a.peer))) {
      Fail(CHORUS_PEER_LOST, "kit_probe isend: rank ", a.peer, " closed its endpoint");
    }
    uint64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(e->mutex);
      n = e->peers[static_cast<size_t>(a.peer)].sent++;
    }
    std::string value = std::to_string(a.tag) + " ";
    value.append(static_cast<const char*>(a.data), a.bytes);
    e->store.Set(Endpoint::Key(e->rank, a.peer, n), value);
    auto sent = std::make_unique<chorus_request>();
    sent->done = true;
    *request = sent.release();
  });
}

chorus_status Irecv(Endpoint* e, const chorus_p2p_args* args, chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = StartP2p(e, args, request, "kit_probe irecv");
    auto receive = std::make_unique<chorus_request>();
    receive->endpoint = e;
    receive->peer = a.peer;
    receive->tag = a.tag;
    receive->data = a.data;
    receive->bytes = a.bytes;
    {
      std::lock_guard<std::mutex> lock(e->mutex);
      receive->index = e->peers[static_cast<size_t>(a.peer)].posted[a.tag]++;
    }
    *request = receive.release();
  });
}

void TransportAbort(Endpoint* e) {
  if (e == nullptr) return;
  e->aborted = true;
  e->Close();
}

bool Progress(chorus_request& r, int64_t timeout_ms) {
  if (r.done) return true;
  const chorus_status status =
      chorus::sdk::Guard([&] { r.done = r.endpoint->Receive(r, timeout_ms); });
  if (status != CHORUS_OK) {
    r.done = true;
    r.status = status;
    r.message = chorus::sdk::LastError();
  }
  return r.done;
}

chorus_status Result(const chorus_request& r) {
  return r.status == CHORUS_OK ? CHORUS_OK : chorus::sdk::SetError(r.status, r.message);
}

chorus_status RequestTest(chorus_request* r, int* done) {
  if (r == nullptr || done == nullptr) {
    return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "request_test: a NULL argument");
  }
  *done = Progress(*r, 0) ? 1 : 0;
  return *done != 0 ? Result(*r) : CHORUS_OK;
}

chorus_status RequestWait(chorus_request* r, int64_t timeout_ms) {
  if (r == nullptr) return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "request_wait: NULL");
  if (!Progress(*r, timeout_ms)) {
    return chorus::sdk::SetError(CHORUS_TIMEOUT, "kit_probe: the message of tag " +
                                                     std::to_string(r->tag) + " from rank " +
                                                     std::to_string(r->peer) + " did not come");
  }
  return Result(*r);
}

void RequestFree(chorus_request* r) { delete r; }

}  // namespace

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  static const chorus_transport_api transport = [] {
    chorus_transport_api t{};
    t.struct_size = sizeof(t);
    t.name = "probe";
    t.create = TransportCreate;
    t.destroy = TransportDestroy;
    t.isend = Isend;
    t.irecv = Irecv;
    t.abort = TransportAbort;
    t.capabilities = &kCapabilities;
    return t;
  }();
  static const chorus_plugin table = [] {
    chorus_plugin t = chorus::sdk::PluginTable(
        KIT_PROBE_NAME, "1.0.0", "a store-only transport for testing the conformance kit");
    t.request_test = RequestTest;
    t.request_wait = RequestWait;
    t.request_free = RequestFree;
    t.transport = &transport;
    return t;
  }();
  return &table;
}

#else  // the collective

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  chorus::sdk::HostCollectivePluginInfo info;
  info.plugin_name = KIT_PROBE_NAME;
  info.version = "1.0.0";
  info.description = "a store-only collective for testing the conformance kit";
  info.capabilities = &kCapabilities;
  return chorus::sdk::HostCollectivePlugin<StoreCommunicator>(info);
}

#endif  // KIT_PROBE_TRANSPORT
