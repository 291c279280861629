// template_transport.cc: the smallest transport plugin (plugin.h interface 5), for learning the
// interface; a real transport starts from the socket template. Point-to-point messages between
// ranks go through the rendezvous store the core hands each endpoint (chorus_kv_store): a send
// stores the message in pieces of at most 1 MiB under "msg/<src>/<dst>/<tag>/<seq>/<piece>", then
// its byte count under "msg/<src>/<dst>/<tag>/<seq>"; a receive waits for the count, reads the
// pieces and removes the keys. (Pieces keep each of the store's answers small: its one serving
// thread then answers every rank's requests in turn, where a 64 MiB value held the others back.)
// seq counts the messages of one (peer, tag) on each side, so the messages of one tag arrive in the
// order sent. Slow (every byte goes through the store) but complete, so it passes
// chorus-conformance as it is, and the core's algorithms (ring) run over it.
//
// Rename it: chorus_add_plugin(NAME ...) in CMakeLists.txt, the plugin's name in sdk::PluginTable
// below (it must match the file name libchorus-<name>.so) and the transport's name ("store").
// Run the kit on it, then the core's ring algorithm over it:
//   chorus-conformance --plugin build/libchorus-template_transport.so --require
//   chorus-conformance --builtin --require --gtest_filter='Algorithm.*:RanksAsProcesses.*'
//       --transport build/libchorus-template_transport.so
//
// The semantics it keeps (plugin.h's transport rules T1-T6): a receive names the exact byte count
// (another count fails with INVALID_ARGUMENT naming both); request_wait's time-out leaves the
// request live; abort() from any thread ends pending waits and fails later operations with
// ABORTED; a peer that destroys or aborts its endpoint fails the receives waiting on it, and the
// sends to it, with PEER_LOST.
#include <chorus/plugin.h>

#include <algorithm>
#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

using chorus::sdk::Fail;

namespace {
// The largest value a send stores (a message is split into pieces of this many bytes).
constexpr size_t kPieceBytes = size_t{1} << 20;

size_t PiecesOf(size_t bytes) { return (bytes + kPieceBytes - 1) / kPieceBytes; }

std::string PieceKey(const std::string& message_key, size_t piece) {
  return message_key + "/" + std::to_string(piece);
}

int64_t MillisecondsUntil(std::chrono::steady_clock::time_point deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
}
}  // namespace

struct chorus_transport_endpoint;

// One send or receive. A send completes in isend (the store holds the message from then on); a
// receive completes in request_wait or request_test, once its key is there.
struct chorus_request {
  chorus_transport_endpoint* endpoint = nullptr;
  bool done = false;
  chorus_status status = CHORUS_OK;
  std::string message;  // of a failure: what last_error() says at every wait or test
  // Receives only.
  int peer = 0;
  uint64_t tag = 0;
  std::string key;
  void* data = nullptr;
  size_t bytes = 0;
};

// One rank's endpoint. The store is scoped to this group of endpoints by the core, so no key of
// another group is seen here.
struct chorus_transport_endpoint {
  explicit chorus_transport_endpoint(const chorus_transport_create_args& a)
      : rank(a.rank), size(a.size), store(a.store) {}

  // "closed/<rank>" tells the peers that this endpoint sends nothing more (destroy or abort).
  void Close() {
    if (closed.exchange(true)) return;
    try {
      store.Set("closed/" + std::to_string(rank), "");
    } catch (...) {  // a broken store: the peers time out instead
    }
  }

  // The next sequence number of (peer, tag) in `counters`.
  uint64_t Next(std::map<std::pair<int, uint64_t>, uint64_t>& counters, int peer, uint64_t tag) {
    std::lock_guard<std::mutex> lock(mutex);
    return counters[{peer, tag}]++;
  }

  // Waits up to timeout_ms (0: only looks) for the message of receive `r`; false when it has not
  // come (the request stays live). Throws ABORTED, PEER_LOST or a size mismatch.
  bool Receive(chorus_request& r, int64_t timeout_ms) {
    // GetUnlessAborted ends on abort; slices of kPeerCheckMs let the loop notice a peer that left.
    constexpr int64_t kPeerCheckMs = 500;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const int64_t left = MillisecondsUntil(deadline);
      try {
        Deliver(r, store.GetUnlessAborted(r.key, std::min(left, kPeerCheckMs), &aborted));
        return true;
      } catch (const chorus::Error& e) {
        if (e.status() != CHORUS_TIMEOUT) throw;
      }
      // The peer set its messages before its "closed" key: absent now, it never comes.
      if (store.Contains("closed/" + std::to_string(r.peer)) && !store.Contains(r.key)) {
        Fail(CHORUS_PEER_LOST, "template_transport: rank ", r.peer,
             " closed its endpoint without sending the message of tag ", r.tag, " that rank ", rank,
             " waits for");
      }
      if (left <= kPeerCheckMs) return false;
    }
  }

  // `count` is the sender's byte count; its pieces are in the store already (set before it).
  void Deliver(const chorus_request& r, const std::string& count) {
    const size_t sent = std::stoull(count);
    const size_t pieces = PiecesOf(sent);
    if (sent != r.bytes) {
      for (size_t p = 0; p < pieces; ++p) store.Remove(PieceKey(r.key, p));
      store.Remove(r.key);
      Fail(CHORUS_INVALID_ARGUMENT, "template_transport: rank ", r.peer, " sent ", sent,
           " bytes with tag ", r.tag, ", but rank ", rank, " receives exactly ", r.bytes,
           " (a receive must name the byte count the sender sends)");
    }
    for (size_t p = 0; p < pieces; ++p) {
      const std::string piece = store.Get(PieceKey(r.key, p), 0);
      const size_t at = p * kPieceBytes;
      if (piece.size() != std::min(kPieceBytes, sent - at)) {
        Fail(CHORUS_INTERNAL, "template_transport: piece ", p, " of a message from rank ", r.peer,
             " has ", piece.size(), " bytes");
      }
      std::memcpy(static_cast<char*>(r.data) + at, piece.data(), piece.size());
      store.Remove(PieceKey(r.key, p));
    }
    store.Remove(r.key);
  }

  const int rank, size;
  const chorus::sdk::StoreView store;  // borrowed: lives until destroy returns
  std::atomic<bool> aborted{false};
  std::atomic<bool> closed{false};
  std::mutex mutex;  // guards the counters
  std::map<std::pair<int, uint64_t>, uint64_t> sent, posted;
};

namespace {

using Endpoint = chorus_transport_endpoint;

std::string MessageKey(int from, int to, uint64_t tag, uint64_t seq) {
  return "msg/" + std::to_string(from) + "/" + std::to_string(to) + "/" + std::to_string(tag) +
         "/" + std::to_string(seq);
}

// The checks every isend and irecv starts with; clears *request.
const chorus_p2p_args& Start(Endpoint* endpoint, const chorus_p2p_args* args,
                             chorus_request** request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": request is NULL");
  *request = nullptr;
  if (endpoint == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": endpoint is NULL");
  const auto& a = chorus::sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_p2p_args, bytes), what);
  if (a.peer < 0 || a.peer >= endpoint->size) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": peer ", a.peer, " is not a rank of ", endpoint->size);
  }
  if (a.bytes > 0 && a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": data is NULL");
  if (endpoint->aborted) Fail(CHORUS_ABORTED, what, ": the endpoint was aborted");
  return a;
}

chorus_status Create(const chorus_transport_create_args* args, Endpoint** out) {
  return chorus::sdk::Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "template_transport create: out is NULL");
    *out = nullptr;
    const auto& a = chorus::sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_transport_create_args, num_options),
        "template_transport create");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "template_transport create: rank ", a.rank, " of size ", a.size,
           " is not a rank");
    }
    *out = new Endpoint(a);  // no rendezvous: a send is a store write, whenever the peer comes
  });
}

// No wait: messages this rank sent stay in the store, which outlives every endpoint of the job.
void Destroy(Endpoint* endpoint) {
  if (endpoint == nullptr) return;
  endpoint->Close();
  delete endpoint;
}

chorus_status Isend(Endpoint* endpoint, const chorus_p2p_args* args, chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = Start(endpoint, args, request, "template_transport isend");
    // A peer that closed its endpoint receives nothing more (plugin.h rule T4). One that closes
    // after this look misses the message unnoticed: a store keeps no connection that could say
    // so, which a real transport's does.
    if (a.peer != endpoint->rank && endpoint->store.Contains("closed/" + std::to_string(a.peer))) {
      Fail(CHORUS_PEER_LOST, "template_transport: rank ", a.peer, " closed its endpoint; rank ",
           endpoint->rank, " cannot send it the message of tag ", a.tag);
    }
    const uint64_t seq = endpoint->Next(endpoint->sent, a.peer, a.tag);
    const char* data = static_cast<const char*>(a.data);
    const std::string key = MessageKey(endpoint->rank, a.peer, a.tag, seq);
    for (size_t p = 0; p < PiecesOf(a.bytes); ++p) {
      const size_t at = p * kPieceBytes;
      endpoint->store.Set(PieceKey(key, p),
                          std::string(data + at, std::min(kPieceBytes, a.bytes - at)));
    }
    endpoint->store.Set(key, std::to_string(a.bytes));  // last: the receiver waits for it
    auto sent = std::make_unique<chorus_request>();
    sent->endpoint = endpoint;
    sent->done = true;
    *request = sent.release();
  });
}

chorus_status Irecv(Endpoint* endpoint, const chorus_p2p_args* args, chorus_request** request) {
  return chorus::sdk::Guard([&] {
    const auto& a = Start(endpoint, args, request, "template_transport irecv");
    const uint64_t seq = endpoint->Next(endpoint->posted, a.peer, a.tag);
    auto receive = std::make_unique<chorus_request>();
    receive->endpoint = endpoint;
    receive->peer = a.peer;
    receive->tag = a.tag;
    receive->key = MessageKey(a.peer, endpoint->rank, a.tag, seq);
    receive->data = a.data;
    receive->bytes = a.bytes;
    *request = receive.release();
  });
}

void Abort(Endpoint* endpoint) {
  if (endpoint == nullptr) return;
  endpoint->aborted = true;  // seen by GetUnlessAborted within its 50 ms slice
  endpoint->Close();         // so the peers' receives from this rank fail too
}

// ---- Requests -----------------------------------------------------------------------------------

// Tries to complete `r` within timeout_ms; whether it is done.
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

// A finished request's status, with its message as this thread's last error.
chorus_status Result(const chorus_request& r) {
  return r.status == CHORUS_OK ? CHORUS_OK : chorus::sdk::SetError(r.status, r.message);
}

chorus_status RequestTest(chorus_request* request, int* done) {
  if (request == nullptr || done == nullptr) {
    return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "request_test: a NULL argument");
  }
  *done = Progress(*request, 0) ? 1 : 0;
  return *done != 0 ? Result(*request) : CHORUS_OK;
}

chorus_status RequestWait(chorus_request* request, int64_t timeout_ms) {
  if (request == nullptr) {
    return chorus::sdk::SetError(CHORUS_INVALID_ARGUMENT, "request_wait: request is NULL");
  }
  if (!Progress(*request, timeout_ms)) {
    return chorus::sdk::SetError(
        CHORUS_TIMEOUT, "template_transport: the message of tag " + std::to_string(request->tag) +
                            " from rank " + std::to_string(request->peer) + " did not come in " +
                            std::to_string(timeout_ms) + " ms (the receive is still live)");
  }
  return Result(*request);
}

void RequestFree(chorus_request* request) { delete request; }

// ---- What it carries, and how well (ABI 1.3) ---------------------------------------------------
// The core makes a collective "<algorithm>@store" of every algorithm loaded and this transport,
// and AUTO scores it the algorithm's score x this one / 100 (plugin.h's bands, sdk/README.md
// section 5: 1-9 works everywhere, where the core's reference core_ring = ring@tcp scores 50 x 10
// / 100 = 5; 10-49 general purpose and faster; 50-89 specialists; 90-100 a vendor's library on its
// own hardware). Every byte here goes through the rendezvous store, far slower than the core's tcp
// (10), so it scores 1: its pairs round down to 0 (ring's 50 x 1 / 100), AUTO never picks them and
// only a name selects one (CHORUS_COMMUNICATION=ring@store); chorus-conformance and chorus-info
// say so. Raise it only where chorus-bench --transports tcp,store measured your network faster
// than tcp, by operation, size and job shape (CHORUS_SHAPE_ONE_HOST for a transport that reaches
// only one host's ranks). It carries no tf.distribute RING nor NCCL: those requests get 0.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 1 : 0;
}
// Host memory, any job shape; a transport's ops are ignored (the algorithm's count).
const chorus_capabilities kCapabilities = chorus::sdk::Capabilities(
    chorus::sdk::kHostMemory, CHORUS_SHAPE_ANY, chorus::sdk::kAllCollectiveOps, Score);

// ---- The plugin table -------------------------------------------------------------------------

const chorus_transport_api kTransport = [] {
  chorus_transport_api t{};
  t.struct_size = sizeof(t);
  t.name = "store";
  t.create = Create;
  t.destroy = Destroy;
  t.isend = Isend;
  t.irecv = Irecv;
  t.abort = Abort;
  t.capabilities = &kCapabilities;
  return t;
}();

const chorus_plugin kPlugin = [] {
  chorus_plugin t = chorus::sdk::PluginTable(
      "template_transport",  // must match the file name: libchorus-template_transport.so
      "1.1.0", "SDK template: a transport that moves messages through the rendezvous store");
  t.request_test = RequestTest;  // this plugin hands out requests: its own three functions
  t.request_wait = RequestWait;
  t.request_free = RequestFree;
  t.transport = &kTransport;
  return t;
}();

}  // namespace

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &kPlugin;
}
