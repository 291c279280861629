// The core's tcp transport through the builtin plugin's C table, ranks as threads over an
// in-process rendezvous store: delivery, FIFO order per (peer, tag), size mismatches, abort,
// lost peers, time-outs, and set-up failures.
#include <chorus/rendezvous/kv_store.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "ring_test_util.h"

namespace chorus {
namespace {

using ring_test::Core;
using ring_test::RunRanks;
using Clock = std::chrono::steady_clock;

const chorus_transport_api& Transport() { return *Core().transport(); }
std::string LastError() { return Core().LastError(); }

using EndpointPtr =
    std::unique_ptr<chorus_transport_endpoint, void (*)(chorus_transport_endpoint*)>;
EndpointPtr NoEndpoint() {
  return EndpointPtr(nullptr, [](chorus_transport_endpoint* e) { Transport().destroy(e); });
}

chorus_status CreateEndpoint(int rank, int size, const CKvStore& store, int64_t timeout_ms,
                             EndpointPtr* out, const std::vector<chorus_option>& options = {}) {
  chorus_transport_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = rank;
  args.size = size;
  args.store = store.get();
  args.timeout_ms = timeout_ms;
  args.options = options.data();
  args.num_options = options.size();
  chorus_transport_endpoint* endpoint = nullptr;
  const chorus_status status = Transport().create(&args, &endpoint);
  *out = NoEndpoint();
  if (status == CHORUS_OK) out->reset(endpoint);
  return status;
}

// Endpoints of ranks 0..size-1, created at once (each create waits for the others).
std::vector<EndpointPtr> CreateAll(int size, const CKvStore& store, int64_t timeout_ms = 10000) {
  std::vector<EndpointPtr> endpoints;
  for (int r = 0; r < size; ++r) endpoints.push_back(NoEndpoint());
  RunRanks(size, [&](int rank) {
    ASSERT_EQ(CreateEndpoint(rank, size, store, timeout_ms, &endpoints[static_cast<size_t>(rank)]),
              CHORUS_OK)
        << LastError();
  });
  return endpoints;
}

// A request of the core plugin, freed on destruction.
class Request {
 public:
  Request() = default;
  explicit Request(chorus_request* r) : request_(r) {}
  Request(Request&& other) noexcept : request_(std::exchange(other.request_, nullptr)) {}
  Request& operator=(Request&& other) noexcept {
    std::swap(request_, other.request_);
    return *this;
  }
  ~Request() {
    if (request_ != nullptr) Core().table().request_free(request_);
  }
  chorus_status Wait(int64_t timeout_ms = 10000) const {
    return Core().table().request_wait(request_, timeout_ms);
  }
  bool Done() const {
    int done = 0;
    Core().table().request_test(request_, &done);
    return done != 0;
  }

 private:
  chorus_request* request_ = nullptr;
};

chorus_status Post(bool send, chorus_transport_endpoint* endpoint, int peer, uint64_t tag,
                   void* data, size_t bytes, Request* out) {
  chorus_p2p_args args{};
  args.struct_size = sizeof(args);
  args.peer = peer;
  args.tag = tag;
  args.data = data;
  args.bytes = bytes;
  chorus_request* request = nullptr;
  const chorus_status status = send ? Transport().isend(endpoint, &args, &request)
                                    : Transport().irecv(endpoint, &args, &request);
  *out = Request(request);
  return status;
}

Request Send(chorus_transport_endpoint* endpoint, int peer, uint64_t tag, const void* data,
             size_t bytes) {
  Request request;
  EXPECT_EQ(Post(true, endpoint, peer, tag, const_cast<void*>(data), bytes, &request), CHORUS_OK)
      << LastError();
  return request;
}

Request Recv(chorus_transport_endpoint* endpoint, int peer, uint64_t tag, void* data,
             size_t bytes) {
  Request request;
  EXPECT_EQ(Post(false, endpoint, peer, tag, data, bytes, &request), CHORUS_OK) << LastError();
  return request;
}

TEST(TcpTransport, EveryPairAndItselfExchangeMessages) {
  constexpr int kSize = 4;
  CKvStore store(MakeInProcessStore());
  auto endpoints = CreateAll(kSize, store);
  RunRanks(kSize, [&](int rank) {
    chorus_transport_endpoint* e = endpoints[static_cast<size_t>(rank)].get();
    std::vector<int64_t> out(kSize), in(kSize, -1);
    std::vector<Request> requests;
    for (int peer = 0; peer < kSize; ++peer) {
      out[static_cast<size_t>(peer)] = rank * 100 + peer;
      requests.push_back(Recv(e, peer, 5, &in[static_cast<size_t>(peer)], sizeof(int64_t)));
      requests.push_back(Send(e, peer, 5, &out[static_cast<size_t>(peer)], sizeof(int64_t)));
    }
    for (const Request& r : requests) EXPECT_EQ(r.Wait(), CHORUS_OK) << LastError();
    for (int peer = 0; peer < kSize; ++peer) {
      EXPECT_EQ(in[static_cast<size_t>(peer)], peer * 100 + rank);
    }
  });
}

// Messages of one tag arrive in the order sent, whether the receive was posted before the data
// came (it lands in place) or after (it was buffered), and tags do not hold each other up.
TEST(TcpTransport, FifoPerTagWithInterleavedTags) {
  constexpr int kMessages = 40;
  CKvStore store(MakeInProcessStore());
  auto endpoints = CreateAll(2, store);
  std::atomic<bool> posted{false};
  RunRanks(2, [&](int rank) {
    chorus_transport_endpoint* e = endpoints[static_cast<size_t>(rank)].get();
    if (rank == 0) {
      while (!posted.load()) std::this_thread::yield();
      std::vector<int32_t> values(3 * kMessages);
      std::iota(values.begin(), values.end(), 0);
      std::vector<Request> sends;
      for (int i = 0; i < kMessages; ++i) {  // tags 1, 2 and 3 interleaved
        for (int tag = 1; tag <= 3; ++tag) {
          sends.push_back(Send(e, 1, static_cast<uint64_t>(tag),
                               &values[static_cast<size_t>(3 * i + tag - 1)], sizeof(int32_t)));
        }
      }
      for (const Request& r : sends) EXPECT_EQ(r.Wait(), CHORUS_OK) << LastError();
      return;
    }
    // Tag 3's receives are posted before anything is sent.
    std::vector<int32_t> tag3(kMessages, -1), tag2(kMessages, -1), tag1(kMessages, -1);
    std::vector<Request> early;
    for (int i = 0; i < kMessages; ++i) {
      early.push_back(Recv(e, 0, 3, &tag3[static_cast<size_t>(i)], sizeof(int32_t)));
    }
    posted.store(true);
    for (const Request& r : early) EXPECT_EQ(r.Wait(), CHORUS_OK) << LastError();
    // Tags 2 then 1, after their messages were buffered.
    for (auto* values : {&tag2, &tag1}) {
      const uint64_t tag = values == &tag2 ? 2 : 1;
      for (int i = 0; i < kMessages; ++i) {
        EXPECT_EQ(Recv(e, 0, tag, &(*values)[static_cast<size_t>(i)], sizeof(int32_t)).Wait(),
                  CHORUS_OK)
            << LastError();
      }
    }
    for (int i = 0; i < kMessages; ++i) {
      EXPECT_EQ(tag1[static_cast<size_t>(i)], 3 * i);
      EXPECT_EQ(tag2[static_cast<size_t>(i)], 3 * i + 1);
      EXPECT_EQ(tag3[static_cast<size_t>(i)], 3 * i + 2);
    }
  });
}

TEST(TcpTransport, EmptyAndLargeMessages) {
  CKvStore store(MakeInProcessStore());
  auto endpoints = CreateAll(2, store);
  constexpr size_t kLarge = 24 << 20;
  RunRanks(2, [&](int rank) {
    chorus_transport_endpoint* e = endpoints[static_cast<size_t>(rank)].get();
    std::vector<uint8_t> big(kLarge);
    if (rank == 0) {
      for (size_t i = 0; i < kLarge; ++i) big[i] = static_cast<uint8_t>(i * 131 + 7);
      Request empty = Send(e, 1, 9, nullptr, 0);
      Request large = Send(e, 1, 9, big.data(), big.size());
      EXPECT_EQ(empty.Wait(), CHORUS_OK) << LastError();
      EXPECT_EQ(large.Wait(), CHORUS_OK) << LastError();
      return;
    }
    EXPECT_EQ(Recv(e, 0, 9, nullptr, 0).Wait(), CHORUS_OK) << LastError();
    EXPECT_EQ(Recv(e, 0, 9, big.data(), big.size()).Wait(), CHORUS_OK) << LastError();
    for (size_t i = 0; i < kLarge; ++i) {
      if (big[i] != static_cast<uint8_t>(i * 131 + 7)) {
        ADD_FAILURE() << "byte " << i << " differs";
        break;
      }
    }
  });
}

// A receive of another size fails with a message naming both sizes, the peer and the tag; the
// stream stays in step, so the next message of the tag is delivered.
TEST(TcpTransport, SizeMismatchNamesBothSizesPeerAndTag) {
  CKvStore store(MakeInProcessStore());
  auto endpoints = CreateAll(2, store);
  std::atomic<bool> posted{false};
  RunRanks(2, [&](int rank) {
    chorus_transport_endpoint* e = endpoints[static_cast<size_t>(rank)].get();
    if (rank == 0) {
      while (!posted.load()) std::this_thread::yield();
      const uint64_t eight = 0x0102030405060708;
      const uint32_t four = 42;
      EXPECT_EQ(Send(e, 1, 7, &eight, 8).Wait(), CHORUS_OK);  // meets a posted 4-byte receive
      EXPECT_EQ(Send(e, 1, 7, &four, 4).Wait(), CHORUS_OK);
      EXPECT_EQ(Send(e, 1, 8, &eight, 8).Wait(), CHORUS_OK);  // buffered, then a 2-byte receive
      EXPECT_EQ(Send(e, 1, 8, &four, 4).Wait(), CHORUS_OK);
      return;
    }
    uint32_t small = 0;
    Request mismatched = Recv(e, 0, 7, &small, 4);
    posted.store(true);
    EXPECT_EQ(mismatched.Wait(), CHORUS_INVALID_ARGUMENT);
    const std::string message = LastError();
    EXPECT_NE(message.find("4 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("8 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
    EXPECT_NE(message.find("tag 7"), std::string::npos) << message;
    EXPECT_EQ(Recv(e, 0, 7, &small, 4).Wait(), CHORUS_OK) << LastError();
    EXPECT_EQ(small, 42u);

    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let tag 8 be buffered
    uint16_t tiny = 0;
    EXPECT_EQ(Recv(e, 0, 8, &tiny, 2).Wait(), CHORUS_INVALID_ARGUMENT);
    EXPECT_NE(LastError().find("tag 8"), std::string::npos) << LastError();
    small = 0;
    EXPECT_EQ(Recv(e, 0, 8, &small, 4).Wait(), CHORUS_OK) << LastError();
    EXPECT_EQ(small, 42u);
  });
}

TEST(TcpTransport, WaitTimesOutAndLeavesTheRequestLive) {
  CKvStore store(MakeInProcessStore());
  auto endpoints = CreateAll(2, store);
  int32_t value = 0;
  Request recv = Recv(endpoints[1].get(), 0, 3, &value, sizeof value);
  const auto start = Clock::now();
  EXPECT_EQ(recv.Wait(100), CHORUS_TIMEOUT);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_FALSE(recv.Done());
  const int32_t sent = 77;
  EXPECT_EQ(Send(endpoints[0].get(), 1, 3, &sent, sizeof sent).Wait(), CHORUS_OK);
  EXPECT_EQ(recv.Wait(), CHORUS_OK) << LastError();
  EXPECT_EQ(value, 77);
}

TEST(TcpTransport, AbortFromAnotherThreadUnblocksAPendingReceive) {
  CKvStore store(MakeInProcessStore());
  auto endpoints = CreateAll(2, store);
  int32_t value = 0;
  Request recv = Recv(endpoints[0].get(), 1, 1, &value, sizeof value);
  Request peer_recv = Recv(endpoints[1].get(), 0, 1, &value, sizeof value);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Transport().abort(endpoints[0].get());
  });
  const auto start = Clock::now();
  EXPECT_EQ(recv.Wait(), CHORUS_ABORTED);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  aborter.join();
  // Later operations fail at once; the peer sees this rank leave.
  Request later;
  EXPECT_EQ(Post(true, endpoints[0].get(), 1, 1, &value, sizeof value, &later), CHORUS_ABORTED);
  EXPECT_EQ(peer_recv.Wait(), CHORUS_PEER_LOST);
  EXPECT_NE(LastError().find("rank 0 closed its connection"), std::string::npos) << LastError();
}

// The sender's endpoint goes away while a large message is half way: the receive fails with
// PEER_LOST, and so does every later operation with that peer.
TEST(TcpTransport, PeerDestroyedMidReceiveGivesPeerLost) {
  CKvStore store(MakeInProcessStore());
  auto endpoints = CreateAll(3, store);
  constexpr size_t kBytes = 64 << 20;  // more than the sockets hold
  std::vector<uint8_t> in(kBytes), out(kBytes, 1);
  Request recv = Recv(endpoints[1].get(), 0, 4, in.data(), in.size());
  {
    Request send = Send(endpoints[0].get(), 1, 4, out.data(), out.size());
    endpoints[0].reset();  // the sockets take a few MiB at most: the message is cut short
    EXPECT_EQ(send.Wait(), CHORUS_ABORTED);
  }
  EXPECT_EQ(recv.Wait(), CHORUS_PEER_LOST);
  const std::string message = LastError();
  EXPECT_NE(message.find("rank 0 closed its connection (the process may have died)"),
            std::string::npos)
      << message;
  Request later;
  EXPECT_EQ(Post(false, endpoints[1].get(), 0, 4, in.data(), 8, &later), CHORUS_PEER_LOST);
  EXPECT_EQ(Post(true, endpoints[1].get(), 0, 4, in.data(), 8, &later), CHORUS_PEER_LOST);
  // The other pair is unaffected.
  const int32_t sent = 5;
  int32_t got = 0;
  Request r = Recv(endpoints[2].get(), 1, 4, &got, sizeof got);
  EXPECT_EQ(Send(endpoints[1].get(), 2, 4, &sent, sizeof sent).Wait(), CHORUS_OK);
  EXPECT_EQ(r.Wait(), CHORUS_OK) << LastError();
  EXPECT_EQ(got, 5);
}

TEST(TcpTransport, CreateTimesOutNamingTheMissingRank) {
  CKvStore store(MakeInProcessStore());
  std::vector<chorus_status> statuses(2);
  std::vector<std::string> messages(2);
  const auto start = Clock::now();
  RunRanks(2, [&](int rank) {  // rank 2 of 3 never starts
    EndpointPtr endpoint = NoEndpoint();
    statuses[static_cast<size_t>(rank)] = CreateEndpoint(rank, 3, store, 300, &endpoint);
    messages[static_cast<size_t>(rank)] = LastError();
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(statuses[rank], CHORUS_TIMEOUT) << messages[rank];
    EXPECT_NE(messages[rank].find("rank 2"), std::string::npos) << messages[rank];
  }
}

TEST(TcpTransport, PeerOfAnotherSizeIsRejected) {
  CKvStore store(MakeInProcessStore());
  std::vector<chorus_status> statuses(2);
  std::vector<std::string> messages(2);
  RunRanks(2, [&](int rank) {
    EndpointPtr endpoint = NoEndpoint();
    statuses[static_cast<size_t>(rank)] =
        CreateEndpoint(rank, rank == 0 ? 3 : 2, store, 300, &endpoint);
    messages[static_cast<size_t>(rank)] = LastError();
  });
  EXPECT_NE(statuses[0], CHORUS_OK);  // it waits for a rank 2 that does not exist
  EXPECT_EQ(statuses[1], CHORUS_INVALID_ARGUMENT) << messages[1];
  EXPECT_NE(messages[1].find("size 3"), std::string::npos) << messages[1];
}

TEST(TcpTransport, BadArgumentsAreRejected) {
  CKvStore store(MakeInProcessStore());
  EndpointPtr endpoint = NoEndpoint();
  EXPECT_EQ(CreateEndpoint(0, 1, store, 1000, &endpoint, {{"interface", "lo"}}),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("interface"), std::string::npos) << LastError();
  EXPECT_EQ(CreateEndpoint(2, 2, store, 1000, &endpoint), CHORUS_INVALID_ARGUMENT);
  ASSERT_EQ(CreateEndpoint(0, 1, store, 1000, &endpoint), CHORUS_OK) << LastError();
  int32_t value = 1;
  Request request;
  EXPECT_EQ(Post(true, endpoint.get(), 1, 0, &value, sizeof value, &request),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(Post(false, endpoint.get(), 0, 0, nullptr, 4, &request), CHORUS_INVALID_ARGUMENT);
  // A single rank talks to itself.
  int32_t got = 0;
  Request recv = Recv(endpoint.get(), 0, 0, &got, sizeof got);
  EXPECT_EQ(Send(endpoint.get(), 0, 0, &value, sizeof value).Wait(), CHORUS_OK);
  EXPECT_EQ(recv.Wait(), CHORUS_OK);
  EXPECT_EQ(got, 1);
}

}  // namespace
}  // namespace chorus
