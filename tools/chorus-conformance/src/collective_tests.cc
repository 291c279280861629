// Collective checks with real ranks, for every collective the plugin provides: every operation ×
// dtype × reduce op × counts {0, 1, odd, large} against the reference, in place and out of
// place, with 1, 2, 3 and 4 ranks as threads over an in-process store (as Gloo's tests do); or,
// when the kit is given a job's store (chorus-conformance --ranks-from-environment under mpirun,
// torchrun or TF_CONFIG), with this process as one rank of that job. Then bad arguments, repeated
// create/destroy and abort.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/rendezvous/kv_store.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include "reference.h"
#include "suite.h"
#include "sweep.h"

namespace chorus::conformance::internal {
namespace {

const std::vector<size_t> kCounts = {0, 1, kOddCount, 100003};  // large: > a 64 KiB chunk
constexpr int kCollectiveRankCounts[] = {1, 2, 3, 4};

// One rank's communicator of the collective under test, and how its operations end.
class Rank {
 public:
  Rank(const Suite& suite, RankCommunicator& comm) : suite_(suite), comm_(comm) {}

  chorus_communicator* handle() const { return comm_.get(); }
  const chorus_collective_api& api() const { return comm_.api(); }
  // Destroys this rank's communicator now: the rank leaves the job.
  void Leave() { comm_.Destroy(); }

  // Completes an operation `op` that returned `status` and `request`: "" when it succeeded, a
  // failure naming `what` otherwise. A "not here" answer (UNSUPPORTED, UNAVAILABLE) throws
  // NotHere unless --require asks for `op` (NotHereOnRank).
  std::string Finish(chorus_status status, chorus_request* request, chorus_collective_op op,
                     const std::string& what) {
    std::string message;
    status = FinishRequest(comm_.plugin(), status, request, suite_.timeout_ms(), &message);
    if (status == CHORUS_OK) return "";
    if (IsNotHere(status)) {
      return NotHereOnRank(suite_, status, DeclaresOnHost(api(), op), what, message);
    }
    return what + ": " + StatusName(status) + ": " + message +
           "; these arguments are valid on every rank: complete the request with OK";
  }

  // Runs one case of the sweep and checks its result.
  std::string Run(const OpCase& c, int id, int size) {
    CaseBuffers buffers(c, id, size);
    chorus_request* request = nullptr;
    chorus_status status = CHORUS_INTERNAL;
    switch (c.op) {
      case CHORUS_OP_ALL_REDUCE: {
        chorus_all_reduce_args args{};
        args.struct_size = sizeof(args);
        args.send = buffers.send();
        args.recv = buffers.recv();
        args.count = c.count;
        args.dtype = c.dtype;
        args.op = c.reduce;
        status = api().all_reduce(handle(), &args, &request);
        break;
      }
      case CHORUS_OP_BROADCAST: {
        chorus_collective_broadcast_args args{};
        args.struct_size = sizeof(args);
        args.data = buffers.recv();
        args.count = c.count;
        args.dtype = c.dtype;
        args.root = c.root;
        status = api().broadcast(handle(), &args, &request);
        break;
      }
      case CHORUS_OP_ALL_GATHER: {
        chorus_collective_all_gather_args args{};
        args.struct_size = sizeof(args);
        args.send = buffers.send();
        args.recv = buffers.recv();
        args.count = c.count;
        args.dtype = c.dtype;
        status = api().all_gather(handle(), &args, &request);
        break;
      }
      case CHORUS_OP_REDUCE_SCATTER: {
        chorus_reduce_scatter_args args{};
        args.struct_size = sizeof(args);
        args.send = buffers.send();
        args.recv = buffers.recv();
        args.recv_count = c.count;
        args.dtype = c.dtype;
        args.op = c.reduce;
        status = api().reduce_scatter(handle(), &args, &request);
        break;
      }
      default:
        status = api().barrier(handle(), &request);
        break;
    }
    const std::string failure = Finish(status, request, c.op, Describe(c));
    return failure.empty() ? buffers.Check() : failure;
  }

 private:
  const Suite& suite_;
  RankCommunicator& comm_;
};

using RankBody = std::function<std::string(Rank& rank, int id, int size)>;

// What a create that failed means: a skip (or, under --require, a failure) for a "not here"
// answer, else a failure.
std::string CreateFailure(const Suite& suite, const RankCommunicator& comm) {
  if (IsNotHere(comm.status())) {
    bool declared = false;
    for (int op = CHORUS_OP_ALL_REDUCE; op <= CHORUS_OP_BARRIER; ++op) {
      declared = declared || DeclaresOnHost(comm.api(), static_cast<chorus_collective_op>(op));
    }
    return NotHereOnRank(suite, comm.status(), declared,
                         std::string("create of '") + comm.api().name + "' on host memory",
                         comm.last_error());
  }
  return comm.CreateError();
}

// Runs `body` on every rank of a group of `size` over the collective `api`: a communicator per
// rank as threads over a fresh in-process store, created and destroyed at once; or, in job
// mode, this process's rank only (then `size` is the job's size).
RanksOutcome RunRanks(const Suite& suite, const chorus_collective_api& api, int size,
                      const RankBody& body) {
  const CommunicatorSettings settings(suite.timeout_ms(), suite.options().collective_options);
  const std::string prefix = NextGroupPrefix();
  if (suite.job_mode()) {
    return RunKitRanks(suite, size, [&](int id) -> std::string {
      CKvStore store(WithPrefix(suite.options().job_store, prefix));
      RankCommunicator comm(suite.plugin_ptr(), api, store.get(), id, size, settings);
      if (comm.status() != CHORUS_OK) return CreateFailure(suite, comm);
      Rank rank(suite, comm);
      return body(rank, id, size);
    });
  }
  CommunicatorGroup group(suite.plugin_ptr(), api, size, settings, prefix);
  const bool created = group.CreateError().empty();
  return RunKitRanks(suite, size, [&](int id) -> std::string {
    RankCommunicator& comm = group.member(id);
    if (comm.status() != CHORUS_OK) return CreateFailure(suite, comm);
    if (!created) return "";  // without every rank the check cannot run; the others report why
    Rank rank(suite, comm);
    return body(rank, id, size);
  });
}

std::vector<int> RankCounts(const Suite& suite) {
  if (suite.job_mode()) return {suite.options().job_size};
  return {std::begin(kCollectiveRankCounts), std::end(kCollectiveRankCounts)};
}

// The sweep of one operation: every case, stopping at a rank's first failure.
RankBody SweepBody(chorus_collective_op op, std::vector<bool> placements) {
  return [op, placements](Rank& rank, int id, int size) -> std::string {
    if (op == CHORUS_OP_BROADCAST && rank.api().broadcast == nullptr) return "";
    if (op == CHORUS_OP_ALL_GATHER && rank.api().all_gather == nullptr) return "";
    if (op == CHORUS_OP_REDUCE_SCATTER && rank.api().reduce_scatter == nullptr) return "";
    const auto counts = [](chorus_dtype) { return kCounts; };
    for (const OpCase& c : Cases(op, size, counts, placements)) {
      if (std::string failure = rank.Run(c, id, size); !failure.empty()) {
        // The other ranks would wait for this one in the next case until the time-out.
        if (rank.api().abort != nullptr) rank.api().abort(rank.handle());
        return failure;
      }
    }
    return "";
  };
}

std::string BarrierBody(Rank& rank, int, int) {
  if (rank.api().barrier == nullptr) return "";
  for (int i = 0; i < 3; ++i) {
    chorus_request* request = nullptr;
    const std::string failure = rank.Finish(rank.api().barrier(rank.handle(), &request), request,
                                            CHORUS_OP_BARRIER, "barrier");
    if (!failure.empty()) return failure;
  }
  return "";
}

// Bad arguments fail on the calling rank alone with INVALID_ARGUMENT (or UNSUPPORTED) and a
// message, before any data moves; the communicator stays usable (a barrier follows).
std::string BadArgumentsBody(const Suite& suite, Rank& rank) {
  float data[4] = {1, 2, 3, 4};
  auto expect = [&](chorus_status status, chorus_request* request,
                    const std::string& what) -> std::string {
    if (request != nullptr) {
      return what +
             ": returned a request instead of failing; check the arguments before "
             "starting any work and return INVALID_ARGUMENT with *request left NULL";
    }
    if (status != CHORUS_INVALID_ARGUMENT && status != CHORUS_UNSUPPORTED) {
      return what + ": returned " + std::string(StatusName(status)) +
             ", expected INVALID_ARGUMENT or UNSUPPORTED; check the arguments on the calling "
             "rank, before any data moves, and fail with a last_error() message";
    }
    if (suite.LastError().empty()) {
      return what + ": no last_error() message; set one before returning " + StatusName(status);
    }
    return "";
  };
  chorus_all_reduce_args good{};
  good.struct_size = sizeof(good);
  good.send = data;
  good.recv = data;
  good.count = 4;
  good.dtype = CHORUS_F32;
  good.op = CHORUS_REDUCE_SUM;
  struct Case {
    const char* what;
    void (*change)(chorus_all_reduce_args*);
  };
  const Case cases[] = {
      {"all_reduce with send NULL", [](chorus_all_reduce_args* a) { a->send = nullptr; }},
      {"all_reduce with recv NULL", [](chorus_all_reduce_args* a) { a->recv = nullptr; }},
      {"all_reduce with dtype 999",
       [](chorus_all_reduce_args* a) { a->dtype = static_cast<chorus_dtype>(999); }},
      {"all_reduce with reduce op 999",
       [](chorus_all_reduce_args* a) { a->op = static_cast<chorus_reduce_op>(999); }},
      {"all_reduce with struct_size 0", [](chorus_all_reduce_args* a) { a->struct_size = 0; }},
  };
  for (const Case& c : cases) {
    chorus_all_reduce_args args = good;
    c.change(&args);
    chorus_request* request = nullptr;
    const chorus_status status = rank.api().all_reduce(rank.handle(), &args, &request);
    if (auto failure = expect(status, request, c.what); !failure.empty()) return failure;
  }
  chorus_request* request = nullptr;
  if (auto failure = expect(rank.api().all_reduce(rank.handle(), nullptr, &request), request,
                            "all_reduce with args NULL");
      !failure.empty()) {
    return failure;
  }
  if (rank.api().barrier == nullptr) return "";
  return rank.Finish(rank.api().barrier(rank.handle(), &request), request, CHORUS_OP_BARRIER,
                     "barrier after the bad calls");
}

// The arguments of an f32 SUM all_reduce of `count` elements in place at `data`.
chorus_all_reduce_args InPlaceSum(float* data, size_t count) {
  chorus_all_reduce_args args{};
  args.struct_size = sizeof(args);
  args.send = data;
  args.recv = data;
  args.count = count;
  args.dtype = CHORUS_F32;
  args.op = CHORUS_REDUCE_SUM;
  return args;
}

// One all_reduce of a single element.
std::string AllReduceOfOne(Rank& rank, int, int) {
  float value = 1;
  const chorus_all_reduce_args args = InPlaceSum(&value, 1);
  chorus_request* request = nullptr;
  return rank.Finish(rank.api().all_reduce(rank.handle(), &args, &request), request,
                     CHORUS_OP_ALL_REDUCE, "all_reduce of 1");
}

// The name of a test of collective `api`: `base`, and "/<collective>" when the plugin has more
// than one.
std::string TestName(const Suite& suite, const std::string& base,
                     const chorus_collective_api& api) {
  return suite.plugin().collectives().size() > 1 ? base + "/" + api.name : base;
}

// Collective.<name>: `body` on every rank count.
void AddRankTest(const SuitePtr& suite, const chorus_collective_api& api, const std::string& name,
                 RankBody body, int rounds = 1) {
  AddTest("Collective", TestName(*suite, name, api), [suite, &api, body, rounds] {
    for (int round = 0; round < rounds; ++round) {
      for (int size : RankCounts(*suite)) {
        SCOPED_TRACE(std::to_string(size) + " ranks");
        const std::string context = std::string("collective '") + api.name + "' with " +
                                    std::to_string(size) + " ranks" +
                                    (rounds > 1 ? ", round " + std::to_string(round) : "");
        if (Report(RunRanks(*suite, api, size, body), context)) return;
      }
    }
  });
}

void RegisterOneCollective(const SuitePtr& suite, const chorus_collective_api& api) {
  AddRankTest(suite, api, "AllReduceEveryDtypeOpAndCount",
              SweepBody(CHORUS_OP_ALL_REDUCE, {false, true}));
  AddRankTest(suite, api, "BroadcastEveryDtypeCountAndRoot", SweepBody(CHORUS_OP_BROADCAST, {}));
  AddRankTest(suite, api, "AllGatherEveryDtypeAndCount", SweepBody(CHORUS_OP_ALL_GATHER, {false}));
  AddRankTest(suite, api, "ReduceScatterEveryDtypeOpAndCount",
              SweepBody(CHORUS_OP_REDUCE_SCATTER, {}));
  AddRankTest(suite, api, "RepeatedBarriers", BarrierBody);
  const Suite* kit = suite.get();
  AddRankTest(suite, api, "BadArgumentsFailOnTheCallingRank",
              [kit](Rank& rank, int, int) { return BadArgumentsBody(*kit, rank); });
  AddRankTest(suite, api, "RepeatedCreateAndDestroy", AllReduceOfOne, 3);
  // Rank 0 all-reduces alone (rank 1 never joins, and leaves); another thread aborts rank 0's
  // communicator: the call must end with ABORTED (or PEER_LOST/TIMEOUT, which some libraries
  // report) within 30 s, or the kit's time-out when that is shorter (but at least 2 s: the abort
  // comes after 300 ms). Thread mode only: a job's ranks cannot be told to stay away.
  AddTest("Collective", TestName(*suite, "AbortEndsAPendingOperation", api), [suite, &api] {
    if (suite->job_mode()) {
      GTEST_SKIP() << "runs with ranks as threads only (a job's ranks cannot be told to stay "
                      "away); run the kit without a job to check it";
    }
    if (api.abort == nullptr) {
      GTEST_SKIP() << "the collective table's abort is NULL; set abort to check that it ends a "
                      "pending operation";
    }
    const int64_t within_ms =
        std::max<int64_t>(std::min<int64_t>(suite->timeout_ms(), 30000), 2000);
    const RanksOutcome outcome =
        RunRanks(*suite, api, 2, [&](Rank& rank, int id, int) -> std::string {
          if (id == 1) {
            rank.Leave();
            return "";
          }
          std::vector<float> data(1 << 16, 1.0f);
          std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            rank.api().abort(rank.handle());
          });
          const chorus_all_reduce_args args = InPlaceSum(data.data(), data.size());
          chorus_request* request = nullptr;
          const auto started = std::chrono::steady_clock::now();
          chorus_status status = rank.api().all_reduce(rank.handle(), &args, &request);
          PluginRequest pending(suite->plugin(), status == CHORUS_OK ? request : nullptr);
          if (!pending.empty()) status = pending.Wait(within_ms);
          aborter.join();
          if (status == CHORUS_TIMEOUT && !pending.empty() && !pending.Done()) {
            // Left live (plugin.h frees only a finished request), and its buffer with it.
            static_cast<void>(new std::vector<float>(std::move(data)));
            return "the all_reduce pending at abort() is still pending " +
                   std::to_string(within_ms) +
                   " ms after it began; abort must make pending requests finish with "
                   "CHORUS_ABORTED at once";
          }
          if (std::chrono::steady_clock::now() - started > std::chrono::milliseconds(within_ms)) {
            return "abort did not end the pending all_reduce within " + std::to_string(within_ms) +
                   " ms; abort must make pending requests finish with CHORUS_ABORTED at once";
          }
          if (status == CHORUS_OK) {
            return "an all_reduce of 65536 f32 with a missing rank succeeded; it cannot "
                   "complete without rank 1: wait for it, and end with ABORTED on abort";
          }
          if (status == CHORUS_INVALID_ARGUMENT || status == CHORUS_INTERNAL) {
            return std::string("the aborted all_reduce returned ") + StatusName(status) +
                   ", expected ABORTED; make abort end pending requests with CHORUS_ABORTED";
          }
          return "";
        });
    Report(outcome, std::string("collective '") + api.name + "'");
  });
}

}  // namespace

void RegisterCollectiveTests(const SuitePtr& suite) {
  for (const chorus_collective_api* api : suite->plugin().collectives()) {
    RegisterOneCollective(suite, *api);
  }
}

}  // namespace chorus::conformance::internal
