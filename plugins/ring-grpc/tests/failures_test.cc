// Failures: a rank that never arrives (TIMEOUT), abort() from another thread (ABORTED), a rank
// that goes away mid-operation (PEER_LOST), ranks that disagree (INVALID_ARGUMENT), bad
// arguments. None of them may hang.
#include <chorus/rendezvous/kv_store.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "ring_grpc.grpc.pb.h"
#include "ring_test_support.h"

namespace chorus::ring_grpc::test {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// An f32 all-reduce of `count` elements (SUM, out of place).
chorus_status AllReduce(chorus_communicator* comm, size_t count, chorus_dtype dtype = CHORUS_F32) {
  std::vector<uint8_t> send(count * chorus_dtype_size(dtype), 1), recv(send.size());
  chorus_all_reduce_args args{};
  args.struct_size = sizeof(args);
  args.send = send.data();
  args.recv = recv.data();
  args.count = count;
  args.dtype = dtype;
  args.op = CHORUS_REDUCE_SUM;
  chorus_request* request = nullptr;
  return Collective().all_reduce(comm, &args, &request);
}

chorus_status Barrier(chorus_communicator* comm) {
  chorus_request* request = nullptr;
  return Collective().barrier(comm, &request);
}

TEST(RingFailures, ARankThatNeverArrivesIsATimeoutNamingIt) {
  const int size = 3;
  std::barrier done(size);
  RunRing(size, 500, {}, [&](int rank, RankCommunicator& comm) {
    if (rank != 2) {  // rank 2 never calls the all-reduce
      const auto start = Clock::now();
      EXPECT_EQ(AllReduce(comm.get(), 1001), CHORUS_TIMEOUT);
      const std::string message = LastError();
      EXPECT_LT(SecondsSince(start), 10.0);
      EXPECT_TRUE(Contains(message, "all_reduce")) << message;
      // Rank 0 waits for rank 2 and times out first, unless a busy machine lets rank 1 (which
      // waits for rank 0) win the race; its failure then comes around the ring.
      EXPECT_TRUE(Contains(message, "timed out after 500 ms waiting for rank")) << message;
      // A broken communicator fails at once, with the same status.
      EXPECT_EQ(Barrier(comm.get()), CHORUS_TIMEOUT);
      EXPECT_TRUE(Contains(LastError(), "failed before")) << LastError();
    }
    done.arrive_and_wait();
    if (rank == 2) {  // arriving late: the failure that went around the ring is waiting for it
      EXPECT_EQ(AllReduce(comm.get(), 1001), CHORUS_TIMEOUT) << LastError();
    }
  });
}

TEST(RingFailures, AbortFromAnotherThreadFailsThePendingOperationQuickly) {
  const int size = 2;
  std::barrier done(size);
  RunRing(size, 60000, {}, [&](int rank, RankCommunicator& comm) {
    if (rank == 0) {
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        Collective().abort(comm.get());
      });
      const auto start = Clock::now();
      EXPECT_EQ(AllReduce(comm.get(), 262147), CHORUS_ABORTED) << LastError();
      EXPECT_LT(SecondsSince(start), 5.0);
      aborter.join();
      EXPECT_EQ(Barrier(comm.get()), CHORUS_ABORTED);  // and every later operation
    }
    done.arrive_and_wait();
    if (rank == 1) {  // rank 0 told its neighbour
      const auto start = Clock::now();
      EXPECT_EQ(AllReduce(comm.get(), 262147), CHORUS_ABORTED) << LastError();
      EXPECT_LT(SecondsSince(start), 5.0);
    }
    done.arrive_and_wait();  // rank 0 stays until then: its leaving would be a PEER_LOST
  });
}

TEST(RingFailures, AbortBeforeAnyOperation) {
  RunRing(1, 1000, {}, [&](int, RankCommunicator& comm) {
    Collective().abort(comm.get());
    EXPECT_EQ(Barrier(comm.get()), CHORUS_ABORTED);
  });
}

TEST(RingFailures, ARankThatDestroysItsCommunicatorMidOperationLosesItsPeers) {
  const int size = 3;
  RunRing(size, 60000, {}, [&](int rank, RankCommunicator& comm) {
    if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      comm.Destroy();  // while ranks 0 and 1 wait inside the all-reduce
      return;
    }
    const auto start = Clock::now();
    const chorus_status status = AllReduce(comm.get(), 262147);
    const std::string message = LastError();
    EXPECT_TRUE(status == CHORUS_PEER_LOST || status == CHORUS_ABORTED)
        << "status " << status << ": " << message;
    EXPECT_TRUE(Contains(message, "rank 2")) << message;
    EXPECT_LT(SecondsSince(start), 15.0);
  });
}

TEST(RingFailures, MismatchedCountsAreAnInvalidArgumentNamingBoth) {
  const int size = 3;
  std::barrier done(size);
  RunRing(size, 20000, {}, [&](int rank, RankCommunicator& comm) {
    EXPECT_EQ(AllReduce(comm.get(), rank == 2 ? 1002 : 1001), CHORUS_INVALID_ARGUMENT);
    const std::string message = LastError();
    // Rank 0 (receiving from rank 2) and rank 2 (receiving from rank 1) see the mismatch, and
    // rank 1 hears of it; whoever's report arrives first, every message names both counts.
    EXPECT_TRUE(Contains(message, "rank 2 passed 1002 elements of f32 (4008 bytes)")) << message;
    EXPECT_TRUE(Contains(message, "passed 1001 elements of f32 (4004 bytes)")) << message;
    done.arrive_and_wait();  // nobody leaves (and closes its streams) before all failed
  });
}

TEST(RingFailures, MismatchedDtypesAndOperationsAreInvalidArguments) {
  std::barrier done(2);
  RunRing(2, 20000, {}, [&](int rank, RankCommunicator& comm) {
    EXPECT_EQ(AllReduce(comm.get(), 10, rank == 0 ? CHORUS_F32 : CHORUS_I32),
              CHORUS_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(LastError(), rank == 0 ? "of i32" : "of f32")) << LastError();
    done.arrive_and_wait();
  });
  RunRing(2, 20000, {}, [&](int rank, RankCommunicator& comm) {
    const chorus_status status = rank == 0 ? AllReduce(comm.get(), 10) : Barrier(comm.get());
    EXPECT_EQ(status, CHORUS_INVALID_ARGUMENT);
    // Rank 1 sees the mismatch; rank 0 hears of it from rank 1.
    EXPECT_TRUE(Contains(LastError(), "rank 0 called all_reduce where rank 1 called barrier"))
        << LastError();
    done.arrive_and_wait();
  });
}

TEST(RingFailures, ArgumentErrorsLeaveTheCommunicatorUsable) {
  RunRing(2, 20000, {}, [&](int rank, RankCommunicator& comm) {
    if (rank == 0) {
      std::vector<float> data(4);
      chorus_all_reduce_args args{};
      args.struct_size = sizeof(args);
      args.send = data.data();
      args.recv = data.data();
      args.count = data.size();
      args.dtype = CHORUS_F32;
      args.op = CHORUS_REDUCE_MEAN;
      chorus_request* request = nullptr;
      EXPECT_EQ(Collective().all_reduce(comm.get(), &args, &request), CHORUS_UNSUPPORTED);
    }
    EXPECT_EQ(AllReduce(comm.get(), 4), CHORUS_OK) << LastError();
  });
}

TEST(RingFailures, SegmentBytesThatDifferFailCreate) {
  const ThreadJob job(2);
  const auto failures = conformance::RunRankThreads(2, [&](int rank) {
    const Options options = {{"segment_bytes", rank == 0 ? "1024" : "2048"}};
    const auto comm = CreateCommunicator(job, rank, 2, 10000, options);
    EXPECT_EQ(comm->status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(comm->last_error(), "segment_bytes")) << comm->last_error();
  });
  EXPECT_EQ(failures.Joined(), "");
}

TEST(RingFailures, CreateTimesOutWhenANeighbourNeverComes) {
  const ThreadJob job(2);
  const auto start = Clock::now();
  const auto comm = CreateCommunicator(job, 0, 2, 300);
  EXPECT_EQ(comm->status(), CHORUS_TIMEOUT);
  EXPECT_TRUE(Contains(comm->last_error(), "rank 1")) << comm->last_error();
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(comm->get(), nullptr);
}

// With a job secret (CHORUS_JOB_SECRET), a stream that does not prove it is refused without
// failing the job, and the job's own ranks, which prove it, still form the ring.
TEST(RingFailures, WithAJobSecretAStreamWithoutTheProofIsRefused) {
  ::setenv("CHORUS_JOB_SECRET", "ring-grpc-test-secret-0123456789", 1);
  const ThreadJob job(2);
  std::unique_ptr<RankCommunicator> rank1;
  std::thread acceptor([&] { rank1 = CreateCommunicator(job, 1, 2, 10000); });
  const std::string address =
      ToString(job.shared()->Get("job/ring_grpc/addr/1", std::chrono::seconds(10)));
  const auto stub =
      wire::Ring::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  context.AddMetadata("chorus-ring-rank", "0");
  context.AddMetadata("chorus-ring-size", "2");
  context.AddMetadata("chorus-ring-segment-bytes", "1048576");
  context.AddMetadata("chorus-ring-proof", std::string(64, '0'));
  wire::Ack ack;
  const auto writer = stub->Exchange(&context, &ack);
  writer->WritesDone();
  const grpc::Status refused = writer->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(refused.error_message(), "does not prove the job's secret"))
      << refused.error_message();

  const auto rank0 = CreateCommunicator(job, 0, 2, 10000);
  acceptor.join();
  ::unsetenv("CHORUS_JOB_SECRET");
  EXPECT_EQ(rank0->status(), CHORUS_OK) << rank0->last_error();
  ASSERT_NE(rank1, nullptr);
  EXPECT_EQ(rank1->status(), CHORUS_OK) << rank1->last_error();
}

TEST(RingBadArguments, CreateRejectsBadRanksOptionsAndStores) {
  const ThreadJob job(3);
  EXPECT_EQ(CreateCommunicator(job, 2, 2, 1000)->status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(CreateCommunicator(job, 0, 0, 1000)->status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(CreateCommunicator(job, 0, 1, 1000, {{"colour", "blue"}})->status(),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(LastError(), "colour")) << LastError();
  EXPECT_EQ(CreateCommunicator(job, 0, 1, 1000, {{"segment_bytes", "0"}})->status(),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(CreateCommunicator(job, 0, 1, 1000, {{"segment_bytes", "x"}})->status(),
            CHORUS_INVALID_ARGUMENT);
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = 0;
  args.size = 2;
  args.store = nullptr;
  chorus_communicator* raw = nullptr;
  EXPECT_EQ(Collective().create(&args, &raw), CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(Collective().create(nullptr, &raw), CHORUS_INVALID_ARGUMENT);
  args.struct_size = 8;
  EXPECT_EQ(Collective().create(&args, &raw), CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(raw, nullptr);
}

TEST(RingBadArguments, OperationsRejectBadArgumentsWithoutCommunicating) {
  RunRing(1, 1000, {}, [&](int, RankCommunicator& comm) {
    const chorus_collective_api& api = Collective();
    chorus_request* request = nullptr;
    std::vector<float> data(8);
    chorus_all_reduce_args reduce{};
    reduce.struct_size = sizeof(reduce);
    reduce.send = data.data();
    reduce.recv = data.data();
    reduce.count = data.size();
    reduce.dtype = CHORUS_F32;
    reduce.op = CHORUS_REDUCE_SUM;
    EXPECT_EQ(api.all_reduce(nullptr, &reduce, &request), CHORUS_INVALID_ARGUMENT);
    EXPECT_EQ(api.all_reduce(comm.get(), nullptr, &request), CHORUS_INVALID_ARGUMENT);
    auto bad = reduce;
    bad.dtype = static_cast<chorus_dtype>(99);
    EXPECT_EQ(api.all_reduce(comm.get(), &bad, &request), CHORUS_INVALID_ARGUMENT);
    bad = reduce;
    bad.op = static_cast<chorus_reduce_op>(42);
    EXPECT_EQ(api.all_reduce(comm.get(), &bad, &request), CHORUS_INVALID_ARGUMENT);
    bad = reduce;
    bad.send = nullptr;
    EXPECT_EQ(api.all_reduce(comm.get(), &bad, &request), CHORUS_INVALID_ARGUMENT);
    bad = reduce;
    bad.count = SIZE_MAX / 2;
    EXPECT_EQ(api.all_reduce(comm.get(), &bad, &request), CHORUS_INVALID_ARGUMENT);
    bad = reduce;
    bad.stream = reinterpret_cast<chorus_stream*>(&data);
    EXPECT_EQ(api.all_reduce(comm.get(), &bad, &request), CHORUS_INVALID_ARGUMENT);
    bad = reduce;
    bad.send = nullptr;
    bad.recv = nullptr;
    bad.count = 0;  // nothing to read or write: NULL is fine
    EXPECT_EQ(api.all_reduce(comm.get(), &bad, &request), CHORUS_OK) << LastError();

    chorus_collective_broadcast_args broadcast{};
    broadcast.struct_size = sizeof(broadcast);
    broadcast.data = data.data();
    broadcast.count = data.size();
    broadcast.dtype = CHORUS_F32;
    broadcast.root = 1;
    EXPECT_EQ(api.broadcast(comm.get(), &broadcast, &request), CHORUS_INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(LastError(), "root 1")) << LastError();

    chorus_collective_all_gather_args gather{};
    gather.struct_size = sizeof(gather);
    gather.send = data.data();
    gather.recv = nullptr;
    gather.count = 2;
    gather.dtype = CHORUS_F32;
    EXPECT_EQ(api.all_gather(comm.get(), &gather, &request), CHORUS_INVALID_ARGUMENT);

    chorus_reduce_scatter_args scatter{};
    scatter.struct_size = sizeof(scatter);
    scatter.send = data.data();
    scatter.recv = data.data();
    scatter.recv_count = 2;
    scatter.dtype = CHORUS_F32;
    scatter.op = CHORUS_REDUCE_MEAN;
    EXPECT_EQ(api.reduce_scatter(comm.get(), &scatter, &request), CHORUS_UNSUPPORTED);
    EXPECT_EQ(api.barrier(nullptr, &request), CHORUS_INVALID_ARGUMENT);
    EXPECT_EQ(api.barrier(comm.get(), &request), CHORUS_OK);  // still usable
  });
}

}  // namespace
}  // namespace chorus::ring_grpc::test
