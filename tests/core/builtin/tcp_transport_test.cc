// The core's tcp transport through the builtin plugin's C table, ranks as threads over an
// in-process rendezvous store (the conformance kit's harness): delivery, FIFO order per (peer,
// tag), size mismatches, abort, lost peers, time-outs, and set-up failures.
#include <chorus/base/error.h>
#include <chorus/collective/transport_endpoint.h>
#include <chorus/rendezvous/kv_store.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/socket_util.h"
#include "ring_test_util.h"

namespace chorus {
namespace {

using conformance::EndpointGroup;
using conformance::PluginRequest;
using ring_test::Core;
using ring_test::CorePlugin;
using ring_test::RunRanks;
using Clock = std::chrono::steady_clock;

constexpr int64_t kWaitMs = 10000;

const chorus_transport_api& Transport() { return *Core().transport(); }
std::string LastError() { return Core().LastError(); }

// Endpoints of ranks 0..size-1, created at once (each create waits for the others).
std::unique_ptr<EndpointGroup> CreateAll(int size, int64_t timeout_ms = 10000) {
  TransportConfig config;
  config.timeout_ms = timeout_ms;
  auto group = std::make_unique<EndpointGroup>(CorePlugin(), Transport(), size, config);
  EXPECT_EQ(group->CreateError(), "");
  return group;
}

// Rank `rank` of `size`'s endpoint over `job`, created on the calling thread: create's status
// (the Error's when it throws), and its message in *message.
chorus_status TryCreate(const conformance::ThreadJob& job, int rank, int size, int64_t timeout_ms,
                        std::string* message, const Options& options = {},
                        std::unique_ptr<TransportEndpoint>* out = nullptr) {
  TransportConfig config;
  config.rank = rank;
  config.size = size;
  config.store = job.store(rank);
  config.timeout_ms = timeout_ms;
  config.options = options;
  try {
    auto endpoint = TransportEndpoint::Create(CorePlugin(), Transport(), config);
    if (out != nullptr) *out = std::move(endpoint);
    message->clear();
    return CHORUS_OK;
  } catch (const Error& e) {
    *message = e.what();
    return e.status();
  }
}

PluginRequest Send(const TransportEndpoint& endpoint, int peer, uint64_t tag, const void* data,
                   size_t bytes) {
  PluginRequest request;
  EXPECT_EQ(conformance::StartSend(endpoint, peer, tag, data, bytes, &request), CHORUS_OK)
      << LastError();
  return request;
}

PluginRequest Recv(const TransportEndpoint& endpoint, int peer, uint64_t tag, void* data,
                   size_t bytes) {
  PluginRequest request;
  EXPECT_EQ(conformance::StartReceive(endpoint, peer, tag, data, bytes, &request), CHORUS_OK)
      << LastError();
  return request;
}

TEST(TcpTransport, EveryPairAndItselfExchangeMessages) {
  constexpr int kSize = 4;
  const auto endpoints = CreateAll(kSize);
  RunRanks(kSize, [&](int rank) {
    const TransportEndpoint& e = *endpoints->endpoint(rank);
    std::vector<int64_t> out(kSize), in(kSize, -1);
    std::vector<PluginRequest> requests;
    for (int peer = 0; peer < kSize; ++peer) {
      out[static_cast<size_t>(peer)] = rank * 100 + peer;
      requests.push_back(Recv(e, peer, 5, &in[static_cast<size_t>(peer)], sizeof(int64_t)));
      requests.push_back(Send(e, peer, 5, &out[static_cast<size_t>(peer)], sizeof(int64_t)));
    }
    for (PluginRequest& r : requests) EXPECT_EQ(r.Wait(kWaitMs), CHORUS_OK) << LastError();
    for (int peer = 0; peer < kSize; ++peer) {
      EXPECT_EQ(in[static_cast<size_t>(peer)], peer * 100 + rank);
    }
  });
}

// Without an option "host", an endpoint listens at, and publishes, the address the cluster spec
// gives its rank (the 1.1 create args' address): 127.0.0.2 here, reachable on loopback.
TEST(TcpTransport, ListensAtTheCreateArgsAddress) {
  TransportConfig config;
  config.timeout_ms = kWaitMs;
  config.address = "127.0.0.2";
  EndpointGroup endpoints(CorePlugin(), Transport(), 2, config);
  ASSERT_EQ(endpoints.CreateError(), "");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string published = ToString(endpoints.job().shared()->Get(
        "job/tcp/addr/" + std::to_string(rank), std::chrono::seconds(5)));
    EXPECT_EQ(published.rfind("127.0.0.2:", 0), 0u) << published;
  }
  RunRanks(2, [&](int rank) {
    const TransportEndpoint& e = *endpoints.endpoint(rank);
    int64_t out = rank + 40, in = -1;
    PluginRequest receive = Recv(e, 1 - rank, 1, &in, sizeof in);
    PluginRequest send = Send(e, 1 - rank, 1, &out, sizeof out);
    EXPECT_EQ(send.Wait(kWaitMs), CHORUS_OK) << LastError();
    EXPECT_EQ(receive.Wait(kWaitMs), CHORUS_OK) << LastError();
    EXPECT_EQ(in, 1 - rank + 40);
  });
}

// Messages of one tag arrive in the order sent, whether the receive was posted before the data
// came (it lands in place) or after (it was buffered), and tags do not hold each other up.
TEST(TcpTransport, FifoPerTagWithInterleavedTags) {
  constexpr int kMessages = 40;
  const auto endpoints = CreateAll(2);
  std::atomic<bool> posted{false};
  RunRanks(2, [&](int rank) {
    const TransportEndpoint& e = *endpoints->endpoint(rank);
    if (rank == 0) {
      while (!posted.load()) std::this_thread::yield();
      std::vector<int32_t> values(3 * kMessages);
      std::iota(values.begin(), values.end(), 0);
      std::vector<PluginRequest> sends;
      for (int i = 0; i < kMessages; ++i) {  // tags 1, 2 and 3 interleaved
        for (int tag = 1; tag <= 3; ++tag) {
          sends.push_back(Send(e, 1, static_cast<uint64_t>(tag),
                               &values[static_cast<size_t>(3 * i + tag - 1)], sizeof(int32_t)));
        }
      }
      for (PluginRequest& r : sends) EXPECT_EQ(r.Wait(kWaitMs), CHORUS_OK) << LastError();
      return;
    }
    // Tag 3's receives are posted before anything is sent.
    std::vector<int32_t> tag3(kMessages, -1), tag2(kMessages, -1), tag1(kMessages, -1);
    std::vector<PluginRequest> early;
    for (int i = 0; i < kMessages; ++i) {
      early.push_back(Recv(e, 0, 3, &tag3[static_cast<size_t>(i)], sizeof(int32_t)));
    }
    posted.store(true);
    for (PluginRequest& r : early) EXPECT_EQ(r.Wait(kWaitMs), CHORUS_OK) << LastError();
    // Tags 2 then 1, after their messages were buffered.
    for (auto* values : {&tag2, &tag1}) {
      const uint64_t tag = values == &tag2 ? 2 : 1;
      for (int i = 0; i < kMessages; ++i) {
        EXPECT_EQ(
            Recv(e, 0, tag, &(*values)[static_cast<size_t>(i)], sizeof(int32_t)).Wait(kWaitMs),
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
  const auto endpoints = CreateAll(2);
  constexpr size_t kLarge = 24 << 20;
  RunRanks(2, [&](int rank) {
    const TransportEndpoint& e = *endpoints->endpoint(rank);
    std::vector<uint8_t> big(kLarge);
    if (rank == 0) {
      for (size_t i = 0; i < kLarge; ++i) big[i] = static_cast<uint8_t>(i * 131 + 7);
      PluginRequest empty = Send(e, 1, 9, nullptr, 0);
      PluginRequest large = Send(e, 1, 9, big.data(), big.size());
      EXPECT_EQ(empty.Wait(kWaitMs), CHORUS_OK) << LastError();
      EXPECT_EQ(large.Wait(kWaitMs), CHORUS_OK) << LastError();
      return;
    }
    EXPECT_EQ(Recv(e, 0, 9, nullptr, 0).Wait(kWaitMs), CHORUS_OK) << LastError();
    EXPECT_EQ(Recv(e, 0, 9, big.data(), big.size()).Wait(kWaitMs), CHORUS_OK) << LastError();
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
  const auto endpoints = CreateAll(2);
  std::atomic<bool> posted{false};
  RunRanks(2, [&](int rank) {
    const TransportEndpoint& e = *endpoints->endpoint(rank);
    if (rank == 0) {
      while (!posted.load()) std::this_thread::yield();
      const uint64_t eight = 0x0102030405060708;
      const uint32_t four = 42;
      // The first meets a posted 4-byte receive; the third is buffered, then a 2-byte receive.
      EXPECT_EQ(Send(e, 1, 7, &eight, 8).Wait(kWaitMs), CHORUS_OK);
      EXPECT_EQ(Send(e, 1, 7, &four, 4).Wait(kWaitMs), CHORUS_OK);
      EXPECT_EQ(Send(e, 1, 8, &eight, 8).Wait(kWaitMs), CHORUS_OK);
      EXPECT_EQ(Send(e, 1, 8, &four, 4).Wait(kWaitMs), CHORUS_OK);
      return;
    }
    uint32_t small = 0;
    PluginRequest mismatched = Recv(e, 0, 7, &small, 4);
    posted.store(true);
    EXPECT_EQ(mismatched.Wait(kWaitMs), CHORUS_INVALID_ARGUMENT);
    const std::string message = LastError();
    EXPECT_NE(message.find("4 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("8 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
    EXPECT_NE(message.find("tag 7"), std::string::npos) << message;
    EXPECT_EQ(Recv(e, 0, 7, &small, 4).Wait(kWaitMs), CHORUS_OK) << LastError();
    EXPECT_EQ(small, 42u);

    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let tag 8 be buffered
    uint16_t tiny = 0;
    EXPECT_EQ(Recv(e, 0, 8, &tiny, 2).Wait(kWaitMs), CHORUS_INVALID_ARGUMENT);
    EXPECT_NE(LastError().find("tag 8"), std::string::npos) << LastError();
    small = 0;
    EXPECT_EQ(Recv(e, 0, 8, &small, 4).Wait(kWaitMs), CHORUS_OK) << LastError();
    EXPECT_EQ(small, 42u);
  });
}

TEST(TcpTransport, WaitTimesOutAndLeavesTheRequestLive) {
  const auto endpoints = CreateAll(2);
  int32_t value = 0;
  PluginRequest recv = Recv(*endpoints->endpoint(1), 0, 3, &value, sizeof value);
  const auto start = Clock::now();
  EXPECT_EQ(recv.Wait(100), CHORUS_TIMEOUT);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_FALSE(recv.Done());
  const int32_t sent = 77;
  EXPECT_EQ(Send(*endpoints->endpoint(0), 1, 3, &sent, sizeof sent).Wait(kWaitMs), CHORUS_OK);
  EXPECT_EQ(recv.Wait(kWaitMs), CHORUS_OK) << LastError();
  EXPECT_EQ(value, 77);
}

TEST(TcpTransport, AbortFromAnotherThreadUnblocksAPendingReceive) {
  const auto endpoints = CreateAll(2);
  int32_t value = 0;
  PluginRequest recv = Recv(*endpoints->endpoint(0), 1, 1, &value, sizeof value);
  PluginRequest peer_recv = Recv(*endpoints->endpoint(1), 0, 1, &value, sizeof value);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Transport().abort(endpoints->endpoint(0)->handle());
  });
  const auto start = Clock::now();
  EXPECT_EQ(recv.Wait(kWaitMs), CHORUS_ABORTED);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  aborter.join();
  // Later operations fail at once; the peer sees this rank leave.
  PluginRequest later;
  EXPECT_EQ(conformance::StartSend(*endpoints->endpoint(0), 1, 1, &value, sizeof value, &later),
            CHORUS_ABORTED);
  EXPECT_EQ(peer_recv.Wait(kWaitMs), CHORUS_PEER_LOST);
  EXPECT_NE(LastError().find("rank 0 closed its connection"), std::string::npos) << LastError();
}

// The sender's endpoint goes away while a large message is half way: the receive fails with
// PEER_LOST, and so does every later operation with that peer. The sockets take a few MiB at
// most, so the destroy usually cuts the message short; but a slow test thread (under
// ThreadSanitizer, say) can lose that race to the progress threads, which then deliver the whole
// message first. Such an attempt proves nothing and is repeated.
TEST(TcpTransport, PeerDestroyedMidReceiveGivesPeerLost) {
  constexpr size_t kBytes = 64 << 20;  // more than the sockets hold
  constexpr int kAttempts = 5;
  std::vector<uint8_t> in(kBytes), out(kBytes, 1);
  for (int attempt = 1;; ++attempt) {
    const auto endpoints = CreateAll(3);
    const TransportEndpoint& one = *endpoints->endpoint(1);
    PluginRequest recv = Recv(one, 0, 4, in.data(), in.size());
    chorus_status send_status = CHORUS_INTERNAL;
    {
      PluginRequest send = Send(*endpoints->endpoint(0), 1, 4, out.data(), out.size());
      endpoints->Destroy(0);
      send_status = send.Wait(kWaitMs);
    }
    const chorus_status recv_status = recv.Wait(kWaitMs);
    const std::string message = LastError();
    if (send_status == CHORUS_OK && recv_status == CHORUS_OK && attempt < kAttempts) continue;
    EXPECT_EQ(send_status, CHORUS_ABORTED);
    EXPECT_EQ(recv_status, CHORUS_PEER_LOST);
    EXPECT_NE(message.find("rank 0 closed its connection (the process may have died)"),
              std::string::npos)
        << message;
    PluginRequest later;
    EXPECT_EQ(conformance::StartReceive(one, 0, 4, in.data(), 8, &later), CHORUS_PEER_LOST);
    EXPECT_EQ(conformance::StartSend(one, 0, 4, in.data(), 8, &later), CHORUS_PEER_LOST);
    // The other pair is unaffected.
    const int32_t sent = 5;
    int32_t got = 0;
    PluginRequest r = Recv(*endpoints->endpoint(2), 1, 4, &got, sizeof got);
    EXPECT_EQ(Send(one, 2, 4, &sent, sizeof sent).Wait(kWaitMs), CHORUS_OK);
    EXPECT_EQ(r.Wait(kWaitMs), CHORUS_OK) << LastError();
    EXPECT_EQ(got, 5);
    break;
  }
}

TEST(TcpTransport, CreateTimesOutNamingTheMissingRank) {
  const conformance::ThreadJob job(3);
  std::vector<chorus_status> statuses(2);
  std::vector<std::string> messages(2);
  const auto start = Clock::now();
  RunRanks(2, [&](int rank) {  // rank 2 of 3 never starts
    const auto r = static_cast<size_t>(rank);
    statuses[r] = TryCreate(job, rank, 3, 300, &messages[r]);
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(statuses[rank], CHORUS_TIMEOUT) << messages[rank];
    EXPECT_NE(messages[rank].find("rank 2"), std::string::npos) << messages[rank];
  }
}

// With CHORUS_JOB_SECRET set, a connection that claims a rank without the proof is dropped, and
// one that never speaks holds nobody up: the members still connect.
TEST(TcpTransport, WithAJobSecretOnlyMembersGetIn) {
  ::setenv("CHORUS_JOB_SECRET", "0123456789abcdef-tcp-transport", 1);
  const conformance::ThreadJob job(2);
  chorus_status acceptor_status = CHORUS_INTERNAL;
  std::string acceptor_message;
  std::unique_ptr<TransportEndpoint> acceptor;
  std::thread rank1(
      [&] { acceptor_status = TryCreate(job, 1, 2, 5000, &acceptor_message, {}, &acceptor); });
  const std::string address =
      ToString(job.shared()->Get("job/tcp/addr/1", std::chrono::seconds(5)));
  const auto colon = address.rfind(':');
  const auto port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
  std::string error;
  UniqueFd silent = ConnectTcp("127.0.0.1", port, DeadlineAfter(std::chrono::seconds(2)), &error);
  UniqueFd impostor = ConnectTcp("127.0.0.1", port, DeadlineAfter(std::chrono::seconds(2)), &error);
  ASSERT_TRUE(silent.valid() && impostor.valid()) << error;
  // A well-formed hello of rank 0 (wire version 2, with a secret) and a proof of zeros.
  uint8_t hello[20 + 32 + 32] = {0x43, 0x54, 0x74, 0x63, 2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1};
  int err = 0;
  ASSERT_EQ(
      SendAll(impostor.get(), hello, sizeof hello, DeadlineAfter(std::chrono::seconds(2)), &err),
      IoResult::kOk);
  uint8_t greeting[52];
  EXPECT_EQ(RecvAll(impostor.get(), greeting, sizeof greeting,
                    DeadlineAfter(std::chrono::seconds(2)), &err),
            IoResult::kOk);
  uint8_t more = 0;
  EXPECT_EQ(RecvAll(impostor.get(), &more, 1, DeadlineAfter(std::chrono::seconds(2)), &err),
            IoResult::kClosed)
      << "rank 1 should drop a connection whose proof is wrong";

  std::string message;
  std::unique_ptr<TransportEndpoint> connector;
  EXPECT_EQ(TryCreate(job, 0, 2, 5000, &message, {}, &connector), CHORUS_OK) << message;
  rank1.join();
  ::unsetenv("CHORUS_JOB_SECRET");
  ASSERT_EQ(acceptor_status, CHORUS_OK) << acceptor_message;
  int32_t sent = 42, got = 0;
  PluginRequest recv = Recv(*acceptor, 0, 7, &got, sizeof got);
  EXPECT_EQ(Send(*connector, 1, 7, &sent, sizeof sent).Wait(kWaitMs), CHORUS_OK);
  EXPECT_EQ(recv.Wait(kWaitMs), CHORUS_OK);
  EXPECT_EQ(got, 42);
}

TEST(TcpTransport, PeerOfAnotherSizeIsRejected) {
  const conformance::ThreadJob job(3);
  std::vector<chorus_status> statuses(2);
  std::vector<std::string> messages(2);
  RunRanks(2, [&](int rank) {
    const auto r = static_cast<size_t>(rank);
    statuses[r] = TryCreate(job, rank, rank == 0 ? 3 : 2, 300, &messages[r]);
  });
  EXPECT_NE(statuses[0], CHORUS_OK);  // it waits for a rank 2 that does not exist
  EXPECT_EQ(statuses[1], CHORUS_INVALID_ARGUMENT) << messages[1];
  EXPECT_NE(messages[1].find("size 3"), std::string::npos) << messages[1];
}

TEST(TcpTransport, BadArgumentsAreRejected) {
  const conformance::ThreadJob job(3);
  std::string message;
  std::unique_ptr<TransportEndpoint> endpoint;
  EXPECT_EQ(TryCreate(job, 0, 1, 1000, &message, {{"interface", "lo"}}), CHORUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("interface"), std::string::npos) << message;
  EXPECT_EQ(TryCreate(job, 2, 2, 1000, &message), CHORUS_INVALID_ARGUMENT);
  ASSERT_EQ(TryCreate(job, 0, 1, 1000, &message, {}, &endpoint), CHORUS_OK) << message;
  int32_t value = 1;
  PluginRequest request;
  EXPECT_EQ(conformance::StartSend(*endpoint, 1, 0, &value, sizeof value, &request),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(conformance::StartReceive(*endpoint, 0, 0, nullptr, 4, &request),
            CHORUS_INVALID_ARGUMENT);
  // A single rank talks to itself.
  int32_t got = 0;
  PluginRequest recv = Recv(*endpoint, 0, 0, &got, sizeof got);
  EXPECT_EQ(Send(*endpoint, 0, 0, &value, sizeof value).Wait(kWaitMs), CHORUS_OK);
  EXPECT_EQ(recv.Wait(kWaitMs), CHORUS_OK);
  EXPECT_EQ(got, 1);
}

}  // namespace
}  // namespace chorus
