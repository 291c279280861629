// Transport checks (plugin.h interface 5), for every transport the plugin provides, with 2 and 3
// ranks as threads (4 for many messages in flight), or one rank per process of a job. Each
// failure names the rule of plugin.h's transport rules (T1-T6) it breaks and what to do:
//  - T1: messages between a pair with one tag arrive in the order sent (64 of distinct sizes and
//    content), also with tags interleaved;
//  - T2: receives posted before and after the data came, tags received in another order than
//    sent, and a small message of one tag that must get past a 64 MiB one of another tag whose
//    receive is posted only later;
//  - 0 B, 1 B, odd, 4 KiB, 1 MiB + 3 and 64 MiB arrive intact;
//  - T3: a receive of another byte count than the send fails with INVALID_ARGUMENT on the
//    receiver;
//  - hundreds of sends and receives posted before any wait all complete, each with its content;
//  - T6: request_wait on a receive with no send returns TIMEOUT at its timeout_ms, and the
//    request stays live: it completes once the send comes;
//  - T5: abort from another thread ends a pending receive (ABORTED, or PEER_LOST) within 5 s, and
//    later operations fail with ABORTED (within 5 s);
//  - T4: a peer that dies (destroys or aborts its endpoint) while a rank waits in a receive from it
//    makes that receive fail (PEER_LOST or ABORTED) within 5 s, and a 64 MiB send to a peer that
//    destroyed its endpoint fails within 5 s, naming the peer.
// Requests go through the plugin's request_test/request_wait/request_free; every wait has a
// time-out: the kit's (--timeout), or the rule's 5 s where a rule sets one.
#include <chorus/base/error.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <regex>
#include <thread>
#include <vector>

#include "endpoint_ranks.h"
#include "suite.h"

namespace chorus::conformance::internal {
namespace {

using Clock = std::chrono::steady_clock;

// One of plugin.h's numbered transport rules, and what a transport does to keep it.
struct Rule {
  const char* label;
  const char* name;
  const char* must;
};

const Rule kOrder = {
    "T1", "order",
    "messages between one pair of ranks with the same tag arrive in the order sent, byte for "
    "byte; tags are independent of each other"};
const Rule kAnyOrder = {
    "T2", "receives in any order",
    "a receive may be posted before or after its send, and receives of different tags in another "
    "order than the sends; a transport must not make a send's completion depend on receives being "
    "posted in send order: it must buffer unexpected messages (without a bound that can block the "
    "connection) or hand large ones over by rendezvous (hold a large message at the sender until "
    "its receive is posted), while later messages of other tags still get through, a small one "
    "(up to 64 KiB) within 5 s of its receive being posted"};
const Rule kExactSize = {
    "T3", "exact size",
    "a receive names the exact byte count sent; fail another count with CHORUS_INVALID_ARGUMENT on "
    "the receiver, with a last_error() naming both counts"};
const Rule kLostPeer = {
    "T4", "lost peer",
    "when a peer dies or closes its endpoint, complete every pending and later send to it and "
    "receive from it with CHORUS_PEER_LOST (or CHORUS_ABORTED after an abort) within 5 s, with "
    "last_error() naming the peer; notice a lost peer (a closed connection, an error callback, a "
    "heartbeat) and never let a send to it hang"};
const Rule kAbort = {
    "T5", "abort",
    "after abort(), complete every pending request with CHORUS_ABORTED within 5 s, without waiting "
    "for the peer, and fail every later call with CHORUS_ABORTED (at once or through its "
    "request)"};
const Rule kTimeOuts = {
    "T6", "time-outs",
    "request_wait returns CHORUS_TIMEOUT once its timeout_ms has passed and leaves the request "
    "live, to be tested or waited on again until it completes"};

// "breaks plugin.h transport rule T2 (receives in any order): <observed>; <what to do>".
std::string Breaks(const Rule& rule, const std::string& observed) {
  return std::string("breaks plugin.h transport rule ") + rule.label + " (" + rule.name +
         "): " + observed + "; " + rule.must;
}

// The time T2, T4 and T5 give a transport (to deliver a small message whose receive is posted,
// to end a request); a check of theirs waits this long, not the kit's time-out.
constexpr auto kFailWithin = std::chrono::seconds(5);
constexpr int64_t kFailWithinMs = 5000;
constexpr int kOrderedMessages = 64;
constexpr int kInterleavedMessages = 32;  // per tag
constexpr int kInFlightPerPeer = 200;
constexpr size_t kLargeBytes = size_t{64} << 20;
const size_t kSizes[] = {0, 1, 7, 4096, (size_t{1} << 20) + 3, kLargeBytes};

std::string Ms(int64_t ms) { return std::to_string(ms) + " ms"; }

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

// A send or receive whose buffer and expected content the check keeps.
struct Transfer {
  Transfer() = default;
  Transfer(Transfer&&) = default;
  Transfer& operator=(Transfer&&) = default;
  // A request still pending when the check gives up is left live (plugin.h allows freeing only a
  // finished one), and its buffer stays borrowed: it is never freed, so that a transport that
  // writes into it later does not write into freed memory.
  ~Transfer() {
    if (!request.empty() && !request.Done()) {
      static_cast<void>(new std::vector<uint8_t>(std::move(data)));
    }
  }

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

// "" when the first `bytes` of `got` are message `seed`, else where they differ (T1).
std::string Differs(const std::vector<uint8_t>& got, const Transfer& t, uint64_t seed) {
  for (size_t i = 0; i < t.bytes; ++i) {
    if (got[i] != ByteOf(seed, i)) {
      return Breaks(kOrder, t.what + ": byte " + std::to_string(i) + " of " +
                                std::to_string(t.bytes) + " differs from message " +
                                std::to_string(t.index) + " of that tag as rank " +
                                std::to_string(t.peer) +
                                " sent it (another message's bytes, or damaged ones)");
    }
  }
  return "";
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

// What a check reports for a transfer still pending after `waited_ms`; empty: the generic text.
using PendingFailure = std::function<std::string(const Transfer& t, int64_t waited_ms)>;

// Waits up to the kit's time-out for a transfer and, for a receive, checks its content.
// `within_ms` >= 0: the time a rule gives the request (T2's 5 s for a small message whose send
// and receive are both posted), if shorter than the kit's time-out.
std::string Finish(const EndpointRank& me, bool send, Transfer& t,
                   const PendingFailure& pending = nullptr, int64_t within_ms = -1) {
  std::string message;
  const int64_t wait_ms = within_ms >= 0 ? std::min(me.timeout_ms, within_ms) : me.timeout_ms;
  const chorus_status status = t.request.Wait(wait_ms, &message);
  if (status == CHORUS_TIMEOUT) {
    if (pending) return pending(t, wait_ms);
    return t.what + ": still pending after " + Ms(me.timeout_ms) +
           " (the kit's time-out, --timeout); complete every request once its matching " +
           (send ? "receive" : "send") + " has been posted";
  }
  if (status != CHORUS_OK) {
    return t.what + ": " + StatusName(status) + ": " + message +
           "; complete the request with OK once the matching transfer has happened";
  }
  if (send) return "";
  return Differs(t.data, t, Seed(t.peer, me.rank, t.tag, t.index));
}

std::string FinishAll(const EndpointRank& me, bool send, std::vector<Transfer>& transfers,
                      const PendingFailure& pending = nullptr, int64_t within_ms = -1) {
  for (Transfer& t : transfers) {
    if (std::string failure = Finish(me, send, t, pending, within_ms); !failure.empty()) {
      return failure;
    }
  }
  return "";
}

// Waits up to the kit's time-out for `key` from another rank.
void AwaitKey(const EndpointRank& me, const std::string& key) {
  me.sync->Get(key, std::chrono::milliseconds(me.timeout_ms));
}

// Whether `message` names rank `peer` (its number as a word of its own).
bool NamesPeer(const std::string& message, int peer) {
  return std::regex_search(message, std::regex("(^|[^0-9])" + std::to_string(peer) + "($|[^0-9])"));
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
  const PendingFailure posted_first = [](const Transfer& t, int64_t waited_ms) {
    return Breaks(kAnyOrder,
                  t.what + ", posted before its send, still pending after " + Ms(waited_ms));
  };
  if (auto f = FinishAll(me, false, receives, posted_first, kFailWithinMs); !f.empty()) return f;
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
  const PendingFailure early_pending = [](const Transfer& t, int64_t waited_ms) {
    return Breaks(kAnyOrder,
                  t.what + ", posted before any send, still pending after " + Ms(waited_ms) +
                      " while rank " + std::to_string(t.peer) +
                      " sent tags 1, 2 and 3 interleaved, one message of each in turn, and this "
                      "rank posts its receives of tags 1 and 2 only after those of tag 3 have "
                      "completed");
  };
  if (auto f = FinishAll(me, false, early, early_pending, kFailWithinMs); !f.empty()) return f;
  const PendingFailure late_pending = [](const Transfer& t, int64_t waited_ms) {
    return Breaks(kAnyOrder, t.what + ", posted after its send, still pending after " +
                                 Ms(waited_ms) +
                                 " (messages of tags 1 to 3 were sent interleaved)");
  };
  for (uint64_t tag : {uint64_t{2}, uint64_t{1}}) {
    for (int peer = 0; peer < me.size; ++peer) {
      if (peer == me.rank) continue;
      for (int i = 0; i < kInterleavedMessages; ++i) {
        Transfer late;
        if (auto f = Start(me, false, peer, tag, i, InterleavedSize(tag, i), &late); !f.empty()) {
          return f;
        }
        if (auto f = Finish(me, false, late, late_pending, kFailWithinMs); !f.empty()) return f;
      }
    }
  }
  return FinishAll(me, true, sends);
}

// Rank 0 sends 64 MiB with tag 1, then 1 KiB with tag 2; rank 1 receives tag 2 first and only
// then posts the receive of tag 1. A transport that keeps the large message in the connection
// until its receive comes (a stream without buffering or rendezvous) holds tag 2 up for ever.
std::string LargeMessageBody(EndpointRank& me) {
  constexpr uint64_t kLargeTag = 1;
  constexpr uint64_t kSmallTag = 2;
  constexpr size_t kSmallBytes = 1024;
  if (me.rank == 0) {
    Transfer large, small;
    std::string failure = Start(me, true, 1, kLargeTag, 0, kLargeBytes, &large);
    if (failure.empty()) failure = Start(me, true, 1, kSmallTag, 0, kSmallBytes, &small);
    me.sync->Set("sent", ToBytes("1"));  // also after a failure, so rank 1 does not wait for it
    if (!failure.empty()) return failure;
    if (auto f = Finish(me, true, small); !f.empty()) return f;
    return Finish(me, true, large);
  }
  if (me.rank != 1) return "";
  AwaitKey(me, "sent");
  Transfer small, large;
  if (auto f = Start(me, false, 0, kSmallTag, 0, kSmallBytes, &small); !f.empty()) return f;
  const PendingFailure held_up = [](const Transfer& t, int64_t waited_ms) {
    return Breaks(kAnyOrder, t.what + " still pending after " + Ms(waited_ms) +
                                 ", while rank 0's earlier send of 64 MiB with tag 1 waits for "
                                 "its receive, which this rank posts only after tag 2's has "
                                 "completed");
  };
  if (auto f = Finish(me, false, small, held_up, kFailWithinMs); !f.empty()) return f;
  if (auto f = Start(me, false, 0, kLargeTag, 0, kLargeBytes, &large); !f.empty()) return f;
  return Finish(me, false, large);
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

// Waits up to kFailWithin for a request that abort() must end; "" when it ended, else a failure
// of rule T5 naming `what`.
std::string AbortEnds(PluginRequest& request, const std::string& what) {
  std::string message;
  const chorus_status status = request.Wait(kFailWithinMs, &message);
  if (status == CHORUS_TIMEOUT) {
    return Breaks(kAbort, what + " still pending " + Ms(kFailWithinMs) + " after abort()");
  }
  if (status != CHORUS_ABORTED && status != CHORUS_PEER_LOST) {
    return Breaks(kAbort, what + " ended with " + StatusName(status) + " (" + message +
                              ") after abort(), expected CHORUS_ABORTED");
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
    if (send.request.Wait(std::min<int64_t>(2000, me.timeout_ms)) == CHORUS_TIMEOUT) {
      me.endpoint->Abort();
      return AbortEnds(send.request,
                       "the send of 8 bytes of tag 7 to rank 1, which rank 1 "
                       "received with another byte count,");
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
  const chorus_status status = receive.request.Wait(me.timeout_ms, &message);
  me.sync->Set("received", ToBytes("1"));
  const std::string what = "a receive of " + std::to_string(receive_bytes) + " bytes of tag 7 " +
                           (posted_first ? "posted before" : "posted after") +
                           " rank 0's send of " + std::to_string(kSent) + " bytes";
  if (status == CHORUS_TIMEOUT) {
    return Breaks(kExactSize, what + " still pending after " + Ms(me.timeout_ms));
  }
  if (status != CHORUS_INVALID_ARGUMENT) {
    return Breaks(kExactSize, what + " returned " + StatusName(status) + " (" + message +
                                  "), expected CHORUS_INVALID_ARGUMENT");
  }
  if (message.empty()) {
    return Breaks(kExactSize, what + " failed without a last_error() message");
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

// Rank 0 posts a receive rank 1 has not sent and waits on it for 500 ms: request_wait must return
// TIMEOUT then (not much earlier, nor much later), and the request must stay live: once rank 1
// sends, it completes with the message.
std::string WaitTimesOutBody(EndpointRank& me) {
  constexpr uint64_t kTag = 13;
  constexpr size_t kBytes = 8;
  constexpr int64_t kWaitMs = 500;
  if (me.rank == 1) {
    AwaitKey(me, "waited");
    Transfer send;
    if (auto f = Start(me, true, 0, kTag, 0, kBytes, &send); !f.empty()) return f;
    return Finish(me, true, send);
  }
  if (me.rank != 0) return "";
  Transfer receive;
  std::string failure = Start(me, false, 1, kTag, 0, kBytes, &receive);
  if (failure.empty()) {
    std::string message;
    const auto start = Clock::now();
    const chorus_status status = receive.request.Wait(kWaitMs, &message);
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    const std::string what =
        "request_wait(" + Ms(kWaitMs) + ") on " + receive.what + ", which rank 1 has not sent yet,";
    if (status != CHORUS_TIMEOUT) {
      failure = Breaks(kTimeOuts, what + " returned " + StatusName(status) + " (" + message +
                                      "), expected CHORUS_TIMEOUT");
    } else if (waited < kWaitMs * 4 / 5 || waited > kWaitMs + 2000) {
      failure = Breaks(kTimeOuts, what + " returned CHORUS_TIMEOUT after " + Ms(waited));
    } else if (receive.request.Done()) {
      failure = Breaks(kTimeOuts, what +
                                      " returned CHORUS_TIMEOUT, but request_test then says "
                                      "the request has finished");
    }
  }
  me.sync->Set("waited", ToBytes("1"));  // also after a failure, so rank 1 does not wait for it
  if (!failure.empty()) return failure;
  const PendingFailure dropped = [](const Transfer& t, int64_t waited_ms) {
    return Breaks(kTimeOuts, t.what + ", whose first request_wait timed out, is still pending " +
                                 Ms(waited_ms) + " after rank 1 sent its message");
  };
  return Finish(me, false, receive, dropped);
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
  Clock::time_point aborted_at;
  std::thread aborter([&] {
    std::this_thread::sleep_for(kAbortAfter);
    me.endpoint->Abort();
    aborted_at = Clock::now();
  });
  std::string message;
  chorus_status status = receive.request.Wait(
      std::chrono::duration_cast<std::chrono::milliseconds>(kAbortAfter + kFailWithin).count(),
      &message);
  aborter.join();
  if (status == CHORUS_TIMEOUT) {
    // The abort came late (a busy machine): the receive still gets the rule's 5 s after it.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(kFailWithin - (Clock::now() - aborted_at));
    if (left.count() > 0) status = receive.request.Wait(left.count(), &message);
  }
  const std::string what =
      "a receive of tag 9 from rank 1, pending when another thread called "
      "abort() on this rank's endpoint,";
  if (status == CHORUS_TIMEOUT) {
    return Breaks(kAbort, what + " is still pending " + Ms(kFailWithinMs) + " after abort()");
  }
  if (status != CHORUS_ABORTED && status != CHORUS_PEER_LOST) {
    return Breaks(kAbort, what + " ended with " + StatusName(status) + " (" + message +
                              "), expected CHORUS_ABORTED");
  }
  // plugin.h: every later operation fails with ABORTED, at the start or through its request.
  Transfer later;
  chorus_status started = CHORUS_OK;
  Start(me, true, 1, 9, 1, 8, &later, &started);
  if (started == CHORUS_OK) {
    started = later.request.Wait(kFailWithinMs, &message);
    if (started == CHORUS_TIMEOUT) {
      return Breaks(kAbort, "a send posted after abort() is still pending after " +
                                Ms(kFailWithinMs) + ", expected CHORUS_ABORTED");
    }
  }
  if (started != CHORUS_ABORTED) {
    return Breaks(kAbort, "a send posted after abort() ended with " +
                              std::string(StatusName(started)) + ", expected CHORUS_ABORTED");
  }
  return "";
}

// "" when a request to or from rank `peer`, which `how` its endpoint, ended as T4 asks within
// kFailWithin of `since`; else a failure of rule T4 naming `what`.
std::string LostPeerEnds(PluginRequest& request, int peer, const std::string& how,
                         const std::string& what, Clock::time_point since = Clock::now()) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(kFailWithin - (Clock::now() - since));
  std::string message;
  const chorus_status status = request.Wait(std::max<int64_t>(0, left.count()), &message);
  const std::string rank = "rank " + std::to_string(peer);
  if (status == CHORUS_TIMEOUT) {
    return Breaks(kLostPeer, what + " is still pending " + Ms(kFailWithinMs) + " after " + rank +
                                 " " + how + " its endpoint");
  }
  if (status == CHORUS_OK) {
    return Breaks(kLostPeer, what + " completed with CHORUS_OK, though " + rank + " had " + how +
                                 " its endpoint (nothing can receive it), expected "
                                 "CHORUS_PEER_LOST");
  }
  if (status != CHORUS_PEER_LOST && status != CHORUS_ABORTED) {
    return Breaks(kLostPeer, what + " ended with " + StatusName(status) + " (" + message +
                                 ") after " + rank + " " + how +
                                 " its endpoint, expected CHORUS_PEER_LOST");
  }
  if (!NamesPeer(message, peer)) {
    return Breaks(kLostPeer, what + " ended with " + StatusName(status) +
                                 ", but its last_error() (\"" + message + "\") does not name " +
                                 rank);
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
  return LostPeerEnds(receive.request, 1, destroy ? "destroyed" : "aborted",
                      "a receive of 1 MiB of tag 4 from rank 1, pending when rank 1 " +
                          std::string(destroy ? "destroyed" : "aborted") + " its endpoint,");
}

// Rank 1 receives one small message from rank 0 (so the two have met), then destroys its
// endpoint; rank 0 then sends it 64 MiB, more than any socket buffer holds. The send must fail
// (PEER_LOST or ABORTED, naming rank 1) within kFailWithin, at isend or through its request.
std::string SendToLostPeerBody(EndpointRank& me) {
  constexpr uint64_t kTag = 5;
  if (me.rank == 1) {
    std::string failure;
    {
      Transfer hello;  // goes before the endpoint
      failure = Start(me, false, 0, kTag, 0, 8, &hello);
      if (failure.empty()) failure = Finish(me, false, hello);
    }
    me.destroy();
    me.sync->Set("died", ToBytes("1"));
    return failure;
  }
  if (me.rank != 0) return "";
  Transfer hello;
  if (auto f = Start(me, true, 1, kTag, 0, 8, &hello); !f.empty()) return f;
  if (auto f = Finish(me, true, hello); !f.empty()) return f;
  AwaitKey(me, "died");
  Transfer large;
  chorus_status started = CHORUS_OK;
  const auto posted = Clock::now();
  Start(me, true, 1, kTag, 1, kLargeBytes, &large, &started);
  const auto isend_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - posted).count();
  const std::string what =
      "a send of 64 MiB of tag 5 to rank 1, posted after rank 1 destroyed its endpoint,";
  if (isend_ms > kFailWithinMs) {
    return Breaks(kLostPeer, what + " blocked in isend for " + Ms(isend_ms) + " (it returned " +
                                 StatusName(started) + ")");
  }
  if (started == CHORUS_OK) return LostPeerEnds(large.request, 1, "destroyed", what, posted);
  const std::string message = me.endpoint->library().LastError();
  if (started != CHORUS_PEER_LOST && started != CHORUS_ABORTED) {
    return Breaks(kLostPeer, what + " failed at isend with " + StatusName(started) + " (" +
                                 message + "), expected CHORUS_PEER_LOST");
  }
  if (!NamesPeer(message, 1)) {
    return Breaks(kLostPeer, what + " failed at isend with " + StatusName(started) +
                                 ", but its last_error() (\"" + message +
                                 "\") does not name rank 1");
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
    AddTransportTest(suite, plugin, *api, "LargeMessageDoesNotHoldUpOtherTags", {2},
                     LargeMessageBody);
    AddTransportTest(suite, plugin, *api, "SizesFromZeroTo64MiB", {2, 3}, SizesBody);
    AddTransportTest(suite, plugin, *api, "ReceiveOfFewerBytesPostedFirstFails", {2},
                     [](EndpointRank& me) { return MismatchBody(me, 4, true); });
    AddTransportTest(suite, plugin, *api, "ReceiveOfMoreBytesPostedLaterFails", {2},
                     [](EndpointRank& me) { return MismatchBody(me, 16, false); });
    AddTransportTest(suite, plugin, *api, "HundredsOfMessagesInFlight", {2, 3, 4}, InFlightBody);
    AddTransportTest(suite, plugin, *api, "WaitTimesOutAndLeavesTheRequestLive", {2},
                     WaitTimesOutBody);
    AddTransportTest(suite, plugin, *api, "AbortEndsAPendingReceive", {2}, AbortBody);
    AddTransportTest(suite, plugin, *api, "PeerThatDestroysItsEndpointFailsTheReceive", {2},
                     [](EndpointRank& me) { return PeerDiesBody(me, true); });
    AddTransportTest(suite, plugin, *api, "PeerThatAbortsItsEndpointFailsTheReceive", {2},
                     [](EndpointRank& me) { return PeerDiesBody(me, false); });
    AddTransportTest(suite, plugin, *api, "PeerThatDestroysItsEndpointFailsALargeSend", {2},
                     SendToLostPeerBody);
  }
}

}  // namespace chorus::conformance::internal
