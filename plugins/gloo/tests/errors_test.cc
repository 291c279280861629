// How the gloo plugin fails: a rank that never arrives, bad arguments, abort, a lost peer, and a
// communicator used after a failure. Every failure has a status and a message.
#include <chorus/base/error.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gloo_plugin.h"

namespace chorus::gloo_test {
namespace {

using testing::AllOf;
using testing::HasSubstr;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Rank 1 of 3 never calls create: ranks 0 and 2 time out after about the time-out, saying who.
TEST(GlooErrors, CreateTimesOutWhenARankNeverArrives) {
  constexpr int64_t kTimeoutMs = 500;
  const ThreadJob job(3, "comm/");
  std::unique_ptr<RankCommunicator> created[3];
  OnRanks(3, [&](int rank) {
    if (rank != 1) created[rank] = CreateRank(job, rank, {}, kTimeoutMs);
  });
  for (int rank : {0, 2}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_NE(created[rank], nullptr);
    EXPECT_EQ(created[rank]->status(), CHORUS_TIMEOUT) << created[rank]->last_error();
    EXPECT_EQ(created[rank]->get(), nullptr);
    EXPECT_THAT(created[rank]->last_error(),
                AllOf(HasSubstr("rank 1 did not arrive"), HasSubstr("500 ms")));
    EXPECT_GE(created[rank]->create_seconds(), 0.45);
    EXPECT_LT(created[rank]->create_seconds(), 3.0);
  }
}

chorus_communicator_create_args CreateArgs(const ThreadJob& job, int rank,
                                           const chorus_option* options, size_t num_options) {
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = rank;
  args.size = job.size();
  args.store = job.store(rank);
  args.timeout_ms = 5000;
  args.options = options;
  args.num_options = num_options;
  return args;
}

// create's status for `args`; on failure *message has the plugin's message.
chorus_status TryCreate(const chorus_communicator_create_args* args, std::string* message) {
  chorus_communicator* comm = nullptr;
  const chorus_status status = Gloo().create(args, &comm);
  *message = status == CHORUS_OK ? "" : LastError();
  if (comm != nullptr) Gloo().destroy(comm);
  return status;
}

TEST(GlooErrors, CreateRejectsBadArguments) {
  const ThreadJob job(1, "comm/");
  std::string message;
  EXPECT_EQ(TryCreate(nullptr, &message), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("arguments are NULL"));

  chorus_communicator_create_args args = CreateArgs(job, 0, nullptr, 0);
  EXPECT_EQ(Gloo().create(&args, nullptr), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("out is NULL"));

  auto with = [&](auto change) {
    chorus_communicator_create_args changed = CreateArgs(job, 0, nullptr, 0);
    change(changed);
    return TryCreate(&changed, &message);
  };
  EXPECT_EQ(with([](auto& a) { a.struct_size = 8; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("struct_size"));
  EXPECT_EQ(with([](auto& a) { a.size = 0; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("size 0"));
  EXPECT_EQ(with([](auto& a) { a.rank = 1; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("rank 1 is not in 0..0"));
  EXPECT_EQ(with([](auto& a) { a.store = nullptr; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("store is NULL"));
  EXPECT_EQ(with([](auto& a) { a.timeout_ms = 0; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("timeout_ms 0"));
  EXPECT_EQ(with([](auto& a) { a.num_options = 1; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("options is NULL"));
}

// create with one option; the status, and the message in *message.
chorus_status CreateWithOptions(std::vector<chorus_option> options, std::string* message) {
  const ThreadJob job(1, "comm/");
  chorus_communicator_create_args args = CreateArgs(job, 0, options.data(), options.size());
  return TryCreate(&args, message);
}

TEST(GlooErrors, CreateRejectsUnknownAlgorithmNamingTheValidOnes) {
  std::string message;
  EXPECT_EQ(CreateWithOptions({{"algorithm", "halving_doubling"}}, &message),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, AllOf(HasSubstr("algorithm=halving_doubling"), HasSubstr("ring"),
                             HasSubstr("ring_chunked"), HasSubstr("bcube")));
}

TEST(GlooErrors, CreateRejectsBadOptions) {
  std::string message;
  EXPECT_EQ(CreateWithOptions({{"num_packs", "2"}}, &message), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, AllOf(HasSubstr("unknown option 'num_packs'"),
                             HasSubstr("algorithm, hostname, interface, transport")));
  EXPECT_EQ(CreateWithOptions({{"algorithm", "ring"}, {"algorithm", "bcube"}}, &message),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("given twice"));
  EXPECT_EQ(CreateWithOptions({{"algorithm", ""}}, &message), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("algorithm is empty"));
  EXPECT_EQ(CreateWithOptions({{"transport", "udp"}}, &message), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("transport=udp"));
  EXPECT_EQ(CreateWithOptions({{"transport", "ibverbs"}}, &message), CHORUS_UNSUPPORTED);
  EXPECT_THAT(message, HasSubstr("transport=ibverbs is not supported"));
  EXPECT_EQ(CreateWithOptions({{"hostname", "127.0.0.1"}, {"interface", "lo"}}, &message),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("not both"));
  EXPECT_EQ(CreateWithOptions({{"interface", "no-such-nic0"}}, &message), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(message, AllOf(HasSubstr("interface=no-such-nic0 names no network interface"),
                             HasSubstr("the interfaces are: "), HasSubstr("lo")));
}

TEST(GlooErrors, CreateAcceptsTcpOptions) {
  std::string message;
  EXPECT_EQ(CreateWithOptions({{"transport", "tcp"}, {"hostname", "localhost"}}, &message),
            CHORUS_OK)
      << message;
  EXPECT_EQ(CreateWithOptions({{"interface", "lo"}, {"algorithm", "bcube"}}, &message), CHORUS_OK)
      << message;
}

TEST(GlooErrors, OperationsRejectBadArguments) {
  const auto group = Group(1);
  ASSERT_EQ(group->CreateError(), "");
  chorus_communicator* comm = group->comm(0);
  float data[4] = {1, 2, 3, 4};
  chorus_request* request = nullptr;
  const chorus_all_reduce_args good{sizeof(good),      data,   data, 4, CHORUS_F32,
                                    CHORUS_REDUCE_SUM, nullptr};
  auto all_reduce = [&](auto change) {
    chorus_all_reduce_args args = good;
    change(args);
    return Gloo().all_reduce(comm, &args, &request);
  };

  EXPECT_EQ(Gloo().all_reduce(nullptr, &good, &request), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("communicator is NULL"));
  EXPECT_EQ(Gloo().all_reduce(comm, nullptr, &request), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("arguments are NULL"));
  EXPECT_EQ(Gloo().all_reduce(comm, &good, nullptr), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("request is NULL"));
  EXPECT_EQ(all_reduce([](auto& a) { a.struct_size = 16; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("struct_size 16"));
  EXPECT_EQ(all_reduce([](auto& a) { a.dtype = static_cast<chorus_dtype>(99); }),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("unknown dtype 99"));
  EXPECT_EQ(all_reduce([](auto& a) { a.op = static_cast<chorus_reduce_op>(77); }),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("unknown reduce op 77"));
  EXPECT_EQ(all_reduce([](auto& a) { a.op = CHORUS_REDUCE_MEAN; }), CHORUS_UNSUPPORTED);
  EXPECT_THAT(LastError(), HasSubstr("MEAN"));
  EXPECT_EQ(all_reduce([](auto& a) { a.send = nullptr; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("send is NULL"));
  EXPECT_EQ(all_reduce([](auto& a) { a.count = SIZE_MAX / 2; }), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("too large"));
  EXPECT_EQ(all_reduce([](auto& a) { a.stream = reinterpret_cast<chorus_stream*>(&a); }),
            CHORUS_UNSUPPORTED);
  EXPECT_THAT(LastError(), HasSubstr("stream"));

  chorus_collective_broadcast_args broadcast{sizeof(broadcast), data, 4, CHORUS_F32, 1, nullptr};
  EXPECT_EQ(Gloo().broadcast(comm, &broadcast, &request), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("root 1 is not a rank"));
  chorus_collective_all_gather_args gather{sizeof(gather), data, nullptr, 4, CHORUS_F32, nullptr};
  EXPECT_EQ(Gloo().all_gather(comm, &gather, &request), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("recv is NULL"));
  chorus_reduce_scatter_args scatter{
      sizeof(scatter), data, data, 4, static_cast<chorus_dtype>(8), CHORUS_REDUCE_MAX, nullptr};
  EXPECT_EQ(Gloo().reduce_scatter(comm, &scatter, &request), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("unknown dtype 8"));
  EXPECT_EQ(Gloo().barrier(nullptr, &request), CHORUS_INVALID_ARGUMENT);

  // None of these broke the communicator.
  EXPECT_EQ(Gloo().all_reduce(comm, &good, &request), CHORUS_OK) << LastError();
  EXPECT_EQ(request, nullptr);
}

TEST(GlooErrors, RequestFunctionsRejectEveryRequest) {
  const chorus_plugin& table = GlooLibrary().table();
  int done = 0;
  EXPECT_EQ(table.request_test(nullptr, &done), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(LastError(), HasSubstr("never hands out a request"));
  EXPECT_EQ(table.request_wait(nullptr, 10), CHORUS_INVALID_ARGUMENT);
  table.request_free(nullptr);
}

// Rank 0 waits in a barrier rank 1 never joins; another thread aborts rank 0. The barrier ends
// with ABORTED (when Gloo's wait ends: by the time-out), later calls fail at once, and rank 1,
// whose connection rank 0 closed, sees its peer lost.
TEST(GlooErrors, AbortFailsThePendingAndLaterCallsAndTheirPeersNotice) {
  constexpr int64_t kTimeoutMs = 1000;
  const auto group = Group(2, {}, kTimeoutMs);
  ASSERT_EQ(group->CreateError(), "");
  chorus_status pending = CHORUS_OK;
  std::string pending_message;
  double pending_seconds = 0;
  std::thread waiter([&] {
    chorus_request* request = nullptr;
    const auto start = std::chrono::steady_clock::now();
    pending = Gloo().barrier(group->comm(0), &request);
    pending_seconds = SecondsSince(start);
    pending_message = LastError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Gloo().abort(group->comm(0));
  Gloo().abort(group->comm(0));  // twice is harmless
  waiter.join();
  EXPECT_EQ(pending, CHORUS_ABORTED) << pending_message;
  EXPECT_THAT(pending_message, HasSubstr("aborted"));
  EXPECT_LT(pending_seconds, kTimeoutMs / 1000.0 + 2.0);

  float data[3] = {1, 2, 3};
  chorus_all_reduce_args args{sizeof(args), data, data, 3, CHORUS_F32, CHORUS_REDUCE_SUM, nullptr};
  chorus_request* request = nullptr;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Gloo().all_reduce(group->comm(0), &args, &request), CHORUS_ABORTED);
  EXPECT_THAT(LastError(), HasSubstr("the communicator was aborted"));
  EXPECT_LT(SecondsSince(start), 0.5);

  start = std::chrono::steady_clock::now();
  EXPECT_EQ(Gloo().barrier(group->comm(1), &request), CHORUS_PEER_LOST) << LastError();
  EXPECT_THAT(LastError(), AllOf(HasSubstr("a peer closed its connection"),
                                 HasSubstr("the process may have died")));
  EXPECT_LT(SecondsSince(start), kTimeoutMs / 1000.0);
}

// Rank 1 never joins rank 0's barrier: rank 0 times out with a message; the communicator then
// fails every call at once, with the same status.
TEST(GlooErrors, AnOperationTimesOutAndTheCommunicatorStaysFailed) {
  constexpr int64_t kTimeoutMs = 400;
  const auto group = Group(2, {}, kTimeoutMs);
  ASSERT_EQ(group->CreateError(), "");
  chorus_request* request = nullptr;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Gloo().barrier(group->comm(0), &request), CHORUS_TIMEOUT) << LastError();
  EXPECT_THAT(LastError(), AllOf(HasSubstr("gloo barrier (rank 0 of 2): timed out"),
                                 HasSubstr("400 ms"), HasSubstr("Gloo: ")));
  const double waited = SecondsSince(start);
  EXPECT_GE(waited, 0.35);
  EXPECT_LT(waited, 3.0);

  start = std::chrono::steady_clock::now();
  EXPECT_EQ(Gloo().barrier(group->comm(0), &request), CHORUS_TIMEOUT);
  EXPECT_THAT(LastError(), HasSubstr("unusable after an earlier failure"));
  EXPECT_LT(SecondsSince(start), 0.2);
}

// Ranks that pass different counts (the core's signature check off, as chorus-bench runs) fail
// alike with INVALID_ARGUMENT naming both calls, for every algorithm, before any data moves:
// without the plugin's own check, Gloo's device thread throws on the rank that receives more
// than it posted and the process aborts. The communicator stays usable.
TEST(GlooErrors, RanksPassingDifferentCountsFailAlikeAndTheCommunicatorStaysUsable) {
  for (const char* algorithm : {"ring", "ring_chunked", "bcube"}) {
    SCOPED_TRACE(algorithm);
    const auto group = Group(2, {{"algorithm", algorithm}});
    ASSERT_EQ(group->CreateError(), "");
    OnRanks(2, [&](int rank) {
      std::vector<float> data(1000, 1.0f);
      chorus_all_reduce_args args{};
      args.struct_size = sizeof(args);
      args.send = data.data();
      args.recv = data.data();
      args.count = rank == 1 ? 999 : 1000;
      args.dtype = CHORUS_F32;
      args.op = CHORUS_REDUCE_SUM;
      chorus_request* request = nullptr;
      EXPECT_EQ(Gloo().all_reduce(group->comm(rank), &args, &request), CHORUS_INVALID_ARGUMENT);
      EXPECT_THAT(LastError(),
                  HasSubstr("gloo all_reduce (rank " + std::to_string(rank) +
                            " of 2): the ranks disagree on the call: rank 0 passes all_reduce of "
                            "1000 f32 (sum) but rank 1 passes all_reduce of 999 f32 (sum)"));
      args.count = 1000;
      ASSERT_EQ(Gloo().all_reduce(group->comm(rank), &args, &request), CHORUS_OK) << LastError();
      EXPECT_EQ(data[999], 2.0f);
    });
  }
}

}  // namespace
}  // namespace chorus::gloo_test
