// Transport checks (plugin.h interface 5), for every transport the plugin provides, with 2 and 3
// ranks as threads (4 for many messages in flight), or one rank per process of a job:
//  - messages between a pair with one tag arrive in the order sent (64 of distinct sizes and
//    content), also with tags interleaved and receives posted before and after the data came;
//  - 0 B, 1 B, odd, 4 KiB, 1 MiB + 3 and 64 MiB arrive intact;
//  - a receive of another byte count than the send fails with INVALID_ARGUMENT on the receiver;
//  - hundreds of sends and receives posted before any wait all complete, each with its content;
//  - abort from another thread ends a pending receive (ABORTED, or PEER_LOST) well within its
//    time-out, and later operations fail with ABORTED;
//  - a peer that dies (destroys or aborts its endpoint) while a rank waits in a receive from it
//    makes that receive fail (PEER_LOST or ABORTED) within kFailWithin, not hang.
// Requests go through the plugin's request_test/request_wait/request_free; every wait has a
// time-out.
#include <chorus/base/error.h>

#include <chrono>
#include <thread>
#include <vector>

#include "endpoint_ranks.h"
#include "suite.h"

namespace chorus::conformance::internal {
namespace {

using Clock = std::chrono::steady_clock;

// A failure (abort, a dead peer) must end a pending receive within this.
constexpr auto kFailWithin = std::chrono::seconds(5);
constexpr int kOrderedMessages = 64;
constexpr int kInterleavedMessages = 32;  // per tag
constexpr int kInFlightPerPeer = 200;
const size_t kSizes[] = {0, 1, 7, 4096, (size_t{1} << 20) + 3, size_t{64} << 20};

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The content of one message, different for every (sender, receiver, tag, index).
uint64_t Seed(int from, int to, uint64_t tag, int index) {
  return ((static_cast<uint64_t>(from) * 64 + static_cast<uint64_t>(to)) * 64 + tag) * 4096 +
         static_cast<uint64_t>(index);
}

uint8_t ByteOf(uint64_t seed, size_t i) {
  return static_cast<uint8_t>((i * 131) ^ (i >> 9) ^ (seed * 977) ^ (seed >> 8));
}

// A buffer of `bytes` (never empty, so its data() is a valid pointer even for 0 bytes).
std::vector<uint8_t> Buffer(size_t bytes) { return std::vector<uint8_t>(bytes > 0 ? bytes : 1); }

std::vector<uint8_t> Message(uint64_t seed, size_t bytes) {
  std::vector<uint8_t> message = Buffer(bytes);
  for (size_t i = 0; i < bytes; ++i) message[i] = ByteOf(seed, i);
  return message;
}

// "" when the first `bytes` of `got` are message `seed`, else where they differ.
std::string Differs(const std::vector<uint8_t>& got, uint64_t seed, size_t bytes,
                    const std::string& what) {
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != ByteOf(seed, i)) {
      return what + ": byte " + std::to_string(i) + " of " + std::to_string(bytes) +
             " differs (a message out of order, or damaged); deliver the messages of one peer "
             "and tag in the order they were sent, byte for byte";
    }
  }
  return "";
}

// A send or receive whose buffer and expected content the check keeps.
struct Transfer {
  int peer = 0;
  uint64_t tag = 0;
  int index = 0;
  std::vector<uint8_t> data;
  size_t bytes = 0;
  PluginRequest request;
  std::string what;
};

std::string Describe(bool send, int me, int peer, uint64_t tag, int index, size_t bytes) {
  return std::string(send ? "send" : "receive") + " " + std::to_string(index) + " of tag " +
         std::to_string(tag) + (send ? " from rank " : " to rank ") + std::to_string(me) +
         (send ? " to rank " : " from rank ") + std::to_string(peer) + " (" +
         std::to_string(bytes) + " bytes)";
}

// Starts a send of message (me, peer, tag, index) or a receive of message (peer, me, tag, index)
// of `bytes`; a failure to start is returned, and what isend/irecv returned in *status.
std::string Start(const EndpointRank& me, bool send, int peer, uint64_t tag, int index,
                  size_t bytes, Transfer* t, chorus_status* started = nullptr) {
  t->peer = peer;
  t->tag = tag;
  t->index = index;
  t->bytes = bytes;
  t->what = Describe(send, me.rank, peer, tag, index, bytes);
  t->data = send ? Message(Seed(me.rank, peer, tag, index), bytes) : Buffer(bytes);
  const chorus_status status =
      send ? StartSend(*me.endpoint, peer, tag, t->data.data(), bytes, &t->request)
           : StartReceive(*me.endpoint, peer, tag, t->data.data(), bytes, &t->request);
  if (started != nullptr) *started = status;
  if (status == CHORUS_OK) return "";
  return t->what + ": " + (send ? "isend" : "irecv") + " returned " + StatusName(status) + ": " +
         me.endpoint->library().LastError() + "; these arguments are valid: return CHORUS_OK";
}

// Waits for a transfer and, for a receive, checks its content.
std::string Finish(const EndpointRank& me, bool send, Transfer& t) {
  std::string message;
  const chorus_status status = t.request.Wait(kEndpointTimeoutMs, &message);
  if (status != CHORUS_OK) {
    return t.what + ": " + StatusName(status) + ": " + message +
           "; complete the request with OK once the matching transfer has happened";
  }
  if (send) return "";
  return Differs(t.data, Seed(t.peer, me.rank, t.tag, t.index), t.bytes, t.what);
}

std::string FinishAll(const EndpointRank& me, bool send, std::vector<Transfer>& transfers) {
  for (Transfer& t : transfers) {
    if (std::string failure = Finish(me, send, t); !failure.empty()) return failure;
  }
  return "";
}

// Waits up to the time-out for `key` from another rank.
void AwaitKey(const EndpointRank& me, const std::string& key) {
  me.sync->Get(key, std::chrono::milliseconds(kEndpointTimeoutMs));
}

size_t OrderedSize(int index) { return 1 + static_cast<size_t>(index * 37 % 97); }

// Every rank posts all its receives from every peer, then sends to every peer: 64 messages of
// tag 11, each of another size and content.
std::string OneTagBody(EndpointRank& me) {
  constexpr uint64_t kTag = 11;
  std::vector<Transfer> receives(static_cast<size_t>((me.size - 1) * kOrderedMessages));
  std::vector<Transfer> sends(receives.size());
  size_t next = 0;
  for (int peer = 0; peer < me.size; ++peer) {
    if (peer == me.rank) continue;
    for (int i = 0; i < kOrderedMessages; ++i, ++next) {
      if (auto f = Start(me, false, peer, kTag, i, OrderedSize(i), &receives[next]); !f.empty()) {
        return f;
      }
    }
  }
  next = 0;
  for (int peer = 0; peer < me.size; ++peer) {
    if (peer == me.rank) continue;
    for (int i = 0; i < kOrderedMessages; ++i, ++next) {
      if (auto f = Start(me, true, peer, kTag, i, OrderedSize(i), &sends[next]); !f.empty()) {
        return f;
      }
    }
  }
  if (auto f = FinishAll(me, false, receives); !f.empty()) return f;
  return FinishAll(me, true, sends);
}

size_t InterleavedSize(uint64_t tag, int index) {
  return 1 + static_cast<size_t>(index * 5 + static_cast<int>(tag) * 3) % 41;
}

// Tags 1, 2 and 3 sent interleaved. Tag 3's receives are posted before anything is sent; tags 2
// and then 1 are received one message at a time after the sends (their data may wait in the
// transport): tags do not hold each other up, and each keeps its order.
std::string InterleavedTagsBody(EndpointRank& me) {
  std::vector<Transfer> early, sends;
  for (int peer = 0; peer < me.size; ++peer) {
    if (peer == me.rank) continue;
    for (int i = 0; i < kInterleavedMessages; ++i) {
      early.emplace_back();
      if (auto f = Start(me, false, peer, 3, i, InterleavedSize(3, i), &early.back()); !f.empty()) {
        return f;
      }
    }
  }
  me.sync->Set("posted/" + std::to_string(me.rank), ToBytes("1"));
  for (int peer = 0; peer < me.size; ++peer) {
    if (peer != me.rank) AwaitKey(me, "posted/" + std::to_string(peer));
  }
  for (int i = 0; i < kInterleavedMessages; ++i) {
    for (uint64_t tag = 1; tag <= 3; ++tag) {
      for (int peer = 0; peer < me.size; ++peer) {
        if (peer == me.rank) continue;
        sends.emplace_back();
        if (auto f = Start(me, true, peer, tag, i, InterleavedSize(tag, i), &sends.back());
            !f.empty()) {
          return f;
        }
      }
    }
  }
  if (auto f = FinishAll(me, false, early); !f.empty()) return f;
  for (uint64_t tag : {uint64_t{2}, uint64_t{1}}) {
    for (int peer = 0; peer < me.size; ++peer) {
      if (peer == me.rank) continue;
      for (int i = 0; i < kInterleavedMessages; ++i) {
        Transfer late;
        if (auto f = Start(me, false, peer, tag, i, InterleavedSize(tag, i), &late); !f.empty()) {
          return f;
        }
        if (auto f = Finish(me, false, late); !f.empty()) return f;
      }
    }
  }
  return FinishAll(me, true, sends);
}

// Around a ring (to rank + 1, from rank - 1), one message of each size in kSizes.
std::string SizesBody(EndpointRank& me) {
  const int next = (me.rank + 1) % me.size;
  const int previous = (me.rank + me.size - 1) % me.size;
  for (size_t k = 0; k < std::size(kSizes); ++k) {
    const uint64_t tag = 20 + k;
    Transfer receive, send;
    if (auto f = Start(me, false, previous, tag, 0, kSizes[k], &receive); !f.empty()) return f;
    if (auto f = Start(me, true, next, tag, 0, kSizes[k], &send); !f.empty()) return f;
    if (auto f = Finish(me, false, receive); !f.empty()) return f;
    if (auto f = Finish(me, true, send); !f.empty()) return f;
  }
  return "";
}

// Rank 0 sends 8 bytes with tag 7; rank 1 receives them into `receive_bytes`, posted before the
// data came (`posted_first`) or after it was sent. The receive must fail with INVALID_ARGUMENT
// and a message. The send may end either way (plugin.h promises nothing there); rank 0 aborts
// its endpoint if it is still pending once rank 1 has its answer, so nothing waits forever.
std::string MismatchBody(EndpointRank& me, size_t receive_bytes, bool posted_first) {
  constexpr size_t kSent = 8;
  constexpr uint64_t kTag = 7;
  if (me.rank == 0) {
    if (posted_first) AwaitKey(me, "posted");
    Transfer send;
    if (auto f = Start(me, true, 1, kTag, 0, kSent, &send); !f.empty()) return f;
    me.sync->Set("sent", ToBytes("1"));
    AwaitKey(me, "received");
    if (send.request.Wait(2000) == CHORUS_TIMEOUT) {
      me.endpoint->Abort();
      if (send.request.Wait(kEndpointTimeoutMs) == CHORUS_TIMEOUT) {
        return "a send still pending after its endpoint was aborted did not end within " +
               std::to_string(kEndpointTimeoutMs) +
               " ms; abort must end every pending request with CHORUS_ABORTED";
      }
    }
    return "";
  }
  if (me.rank != 1) return "";
  Transfer receive;
  if (!posted_first) {
    AwaitKey(me, "sent");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the data may be here by now
  }
  if (auto f = Start(me, false, 0, kTag, 0, receive_bytes, &receive); !f.empty()) return f;
  if (posted_first) me.sync->Set("posted", ToBytes("1"));
  std::string message;
  const chorus_status status = receive.request.Wait(kEndpointTimeoutMs, &message);
  me.sync->Set("received", ToBytes("1"));
  const std::string what = "a receive of " + std::to_string(receive_bytes) + " bytes " +
                           (posted_first ? "posted before" : "posted after") + " a send of " +
                           std::to_string(kSent) + " bytes";
  if (status != CHORUS_INVALID_ARGUMENT) {
    return what + " returned " + StatusName(status) + " (" + message +
           "); plugin.h: a receive must name the exact byte count, another count fails with "
           "INVALID_ARGUMENT on the receiver";
  }
  if (message.empty()) {
    return what + " failed without a last_error() message; set one naming both byte counts";
  }
  return "";
}

size_t InFlightSize(int index) { return 1 + static_cast<size_t>(index * 13 % 64); }

// Every rank posts kInFlightPerPeer receives from every peer (tags 0-4), then as many sends to
// every peer, before it waits on any.
std::string InFlightBody(EndpointRank& me) {
  const size_t per_rank = static_cast<size_t>((me.size - 1) * kInFlightPerPeer);
  std::vector<Transfer> receives(per_rank), sends(per_rank);
  for (bool send : {false, true}) {
    size_t next = 0;
    for (int peer = 0; peer < me.size; ++peer) {
      if (peer == me.rank) continue;
      for (int i = 0; i < kInFlightPerPeer; ++i, ++next) {
        Transfer& t = send ? sends[next] : receives[next];
        if (auto f = Start(me, send, peer, static_cast<uint64_t>(i % 5), i, InFlightSize(i), &t);
            !f.empty()) {
          return f;
        }
      }
    }
  }
  if (auto f = FinishAll(me, false, receives); !f.empty()) return f;
  return FinishAll(me, true, sends);
}

// Rank 0 waits in a receive rank 1 never sends; another thread aborts rank 0's endpoint.
std::string AbortedReceive(EndpointRank& me);

std::string AbortBody(EndpointRank& me) {
  if (me.rank == 0) {
    const std::string failure = AbortedReceive(me);
    me.sync->Set("done", ToBytes("1"));
    return failure;
  }
  if (me.rank == 1) AwaitKey(me, "done");  // stays until rank 0 is done, so it is no dead peer
  return "";
}

std::string AbortedReceive(EndpointRank& me) {
  constexpr auto kAbortAfter = std::chrono::milliseconds(200);
  Transfer receive;
  if (auto f = Start(me, false, 1, 9, 0, 8, &receive); !f.empty()) return f;
  std::thread aborter([&] {
    std::this_thread::sleep_for(kAbortAfter);
    me.endpoint->Abort();
  });
  const auto start = Clock::now();
  std::string message;
  const chorus_status status = receive.request.Wait(kEndpointTimeoutMs, &message);
  const double seconds = SecondsSince(start);
  aborter.join();
  if (status != CHORUS_ABORTED && status != CHORUS_PEER_LOST) {
    return "the receive pending at abort returned " + std::string(StatusName(status)) + " (" +
           message + "), expected ABORTED; abort must end every pending request with ABORTED";
  }
  if (seconds > std::chrono::duration<double>(kAbortAfter + kFailWithin).count()) {
    return "abort ended the pending receive only after " + std::to_string(seconds) +
           " s; abort must end pending requests at once, without waiting for the peer";
  }
  // plugin.h: every later operation fails with ABORTED, at the start or through its request.
  Transfer later;
  chorus_status started = CHORUS_OK;
  Start(me, true, 1, 9, 1, 8, &later, &started);
  if (started == CHORUS_OK) started = later.request.Wait(kEndpointTimeoutMs, &message);
  if (started != CHORUS_ABORTED) {
    return "a send after abort ended with " + std::string(StatusName(started)) +
           ", expected ABORTED; after abort, fail every new isend/irecv with ABORTED (at once or "
           "through its request)";
  }
  return "";
}

// Rank 0 waits in a receive from rank 1; rank 1 then dies: destroys its endpoint (`destroy`) or
// aborts it. Rank 0's receive must fail within kFailWithin of that.
std::string PeerDiesBody(EndpointRank& me, bool destroy) {
  if (me.rank == 1) {
    AwaitKey(me, "posted");
    if (destroy) {
      me.destroy();
    } else {
      me.endpoint->Abort();
    }
    me.sync->Set("died", ToBytes("1"));
    return "";
  }
  if (me.rank != 0) return "";
  Transfer receive;
  const std::string not_started = Start(me, false, 1, 4, 0, size_t{1} << 20, &receive);
  me.sync->Set("posted", ToBytes("1"));  // also after a failure, so rank 1 does not wait for it
  if (!not_started.empty()) return not_started;
  AwaitKey(me, "died");
  const auto start = Clock::now();
  std::string message;
  const chorus_status status = receive.request.Wait(kEndpointTimeoutMs, &message);
  const double seconds = SecondsSince(start);
  const std::string how = destroy ? "destroyed" : "aborted";
  if (status != CHORUS_PEER_LOST && status != CHORUS_ABORTED) {
    return "a receive from rank 1, which " + how + " its endpoint, returned " + StatusName(status) +
           " (" + message +
           "), expected PEER_LOST or ABORTED; end a receive from a dead peer with PEER_LOST";
  }
  if (seconds > std::chrono::duration<double>(kFailWithin).count()) {
    return "a receive from rank 1, which " + how + " its endpoint, failed only after " +
           std::to_string(seconds) +
           " s; notice a lost peer (closed connection, heartbeat) and fail its receives promptly";
  }
  return "";
}

// Transport.<name>/<transport>: `body` on each rank count (thread mode) or the job's size.
void AddTransportTest(const SuitePtr& suite, const std::shared_ptr<PluginLibrary>& plugin,
                      const chorus_transport_api& api, const std::string& name,
                      std::vector<int> thread_sizes, EndpointBody body) {
  AddTest("Transport", name + "/" + api.name, [suite, plugin, &api, thread_sizes, body] {
    std::vector<int> sizes = thread_sizes;
    if (suite->job_mode()) {
      if (suite->options().job_size < 2) {
        GTEST_SKIP() << "needs at least 2 ranks; the job has " << suite->options().job_size
                     << " (start the job with 2 or more ranks to check it)";
      }
      sizes = {suite->options().job_size};
    }
    for (int size : sizes) {
      SCOPED_TRACE(std::to_string(size) + " ranks");
      const std::string context =
          std::string("transport '") + api.name + "' with " + std::to_string(size) + " ranks";
      if (Report(RunEndpointRanks(*suite, plugin, api, size, body), context)) return;
    }
  });
}

}  // namespace

void RegisterTransportTests(const SuitePtr& suite) {
  const std::shared_ptr<PluginLibrary>& plugin = suite->plugin_ptr();
  for (const chorus_transport_api* api : plugin->transports()) {
    AddTransportTest(suite, plugin, *api, "MessagesOfOneTagArriveInOrder", {2, 3}, OneTagBody);
    AddTransportTest(suite, plugin, *api, "InterleavedTagsKeepTheirOrder", {2, 3},
                     InterleavedTagsBody);
    AddTransportTest(suite, plugin, *api, "SizesFromZeroTo64MiB", {2, 3}, SizesBody);
    AddTransportTest(suite, plugin, *api, "ReceiveOfFewerBytesPostedFirstFails", {2},
                     [](EndpointRank& me) { return MismatchBody(me, 4, true); });
    AddTransportTest(suite, plugin, *api, "ReceiveOfMoreBytesPostedLaterFails", {2},
                     [](EndpointRank& me) { return MismatchBody(me, 16, false); });
    AddTransportTest(suite, plugin, *api, "HundredsOfMessagesInFlight", {2, 3, 4}, InFlightBody);
    AddTransportTest(suite, plugin, *api, "AbortEndsAPendingReceive", {2}, AbortBody);
    AddTransportTest(suite, plugin, *api, "PeerThatDestroysItsEndpointFailsTheReceive", {2},
                     [](EndpointRank& me) { return PeerDiesBody(me, true); });
    AddTransportTest(suite, plugin, *api, "PeerThatAbortsItsEndpointFailsTheReceive", {2},
                     [](EndpointRank& me) { return PeerDiesBody(me, false); });
  }
}

}  // namespace chorus::conformance::internal
