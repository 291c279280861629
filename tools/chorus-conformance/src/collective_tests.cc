// Collective checks with real ranks: every operation × dtype × reduce op × counts {0, 1, odd,
// large} against the reference, in place and out of place, with 1, 2, 3 and 4 ranks as threads
// over an in-process store (as Gloo's tests do); or, when the kit is given a job's store
// (chorus-conformance --ranks-from-environment under mpirun, torchrun or TF_CONFIG), with this
// process as one rank of that job. Then bad arguments, repeated create/destroy and abort.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/rendezvous/kv_store.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "reference.h"
#include "suite.h"

namespace chorus::conformance::internal {
namespace {

constexpr int64_t kTimeoutMs = 60000;
constexpr size_t kCounts[] = {0, 1, 1001, 100003};  // large: > a 64 KiB chunk in every dtype
constexpr int kThreadRankCounts[] = {1, 2, 3, 4};

// One rank's communicator, created and destroyed through the plugin's raw table.
class Rank {
 public:
  Rank(const Suite& suite, std::shared_ptr<KvStore> store, int rank, int size)
      : suite_(suite), api_(*suite.plugin().collective()), store_(std::move(store)) {
    chorus_communicator_create_args args{};
    args.struct_size = sizeof(args);
    args.rank = rank;
    args.size = size;
    args.store = store_.get();
    args.timeout_ms = kTimeoutMs;
    const auto raw = RawOptions();
    args.options = raw.data();
    args.num_options = raw.size();
    status_ = api_.create(&args, &handle_);
    if (status_ != CHORUS_OK) {
      handle_ = nullptr;
      error_ = suite.LastError();
    }
  }
  ~Rank() {
    if (handle_ != nullptr) api_.destroy(handle_);
  }
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  chorus_status create_status() const { return status_; }
  const std::string& create_error() const { return error_; }
  chorus_communicator* handle() const { return handle_; }
  const chorus_collective_api& api() const { return api_; }

  // Waits on and frees a request the plugin returned; "" when the operation succeeded.
  std::string Finish(chorus_status status, chorus_request* request, const std::string& what) {
    const chorus_plugin& table = suite_.plugin().table();
    if (status == CHORUS_OK && request != nullptr) {
      status = table.request_wait(request, kTimeoutMs);
      if (status == CHORUS_TIMEOUT) return what + ": request_wait timed out";
      const std::string message = status == CHORUS_OK ? "" : suite_.LastError();
      table.request_free(request);
      if (status != CHORUS_OK) return what + ": " + StatusName(status) + ": " + message;
      return "";
    }
    if (status != CHORUS_OK) return what + ": " + StatusName(status) + ": " + suite_.LastError();
    return "";
  }

 private:
  std::vector<chorus_option> RawOptions() const {
    std::vector<chorus_option> raw;
    for (const auto& [key, value] : suite_.options().collective_options) {
      raw.push_back({key.c_str(), value.c_str()});
    }
    return raw;
  }

  const Suite& suite_;
  const chorus_collective_api& api_;
  CKvStore store_;
  chorus_communicator* handle_ = nullptr;
  chorus_status status_ = CHORUS_OK;
  std::string error_;
};

using RankBody = std::function<std::string(Rank& rank, int id, int size)>;

// Runs `body` on every rank of a group of `size` and returns the ranks' failures, one per line
// ("" when all passed). Thread mode: `size` threads over a fresh in-process store. Job mode (the
// kit was given a store): this process's rank only, and only when `size` is the job's size.
std::string RunRanks(const Suite& suite, int size, const RankBody& body) {
  const KitOptions& options = suite.options();
  static std::atomic<int> group{0};
  const std::string prefix = "conformance/" + std::to_string(group++) + "/";
  auto run_one = [&](std::shared_ptr<KvStore> store, int id) -> std::string {
    try {
      Rank rank(suite, WithPrefix(std::move(store), prefix), id, size);
      if (rank.create_status() != CHORUS_OK) {
        return "rank " + std::to_string(id) + " of " + std::to_string(size) +
               ": create failed with " + StatusName(rank.create_status()) + ": " +
               rank.create_error();
      }
      const std::string failure = body(rank, id, size);
      return failure.empty() ? "" : "rank " + std::to_string(id) + ": " + failure;
    } catch (const std::exception& e) {
      return "rank " + std::to_string(id) + ": " + e.what();
    }
  };
  if (options.job_store) return run_one(options.job_store, options.job_rank);
  auto store = MakeInProcessStore();
  std::vector<std::string> failures(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int id = 0; id < size; ++id) {
    threads.emplace_back([&, id] { failures[static_cast<size_t>(id)] = run_one(store, id); });
  }
  for (auto& t : threads) t.join();
  std::string all;
  for (const auto& f : failures) {
    if (!f.empty()) all += f + "\n";
  }
  return all;
}

std::vector<int> RankCounts(const Suite& suite) {
  if (suite.options().job_store) return {suite.options().job_size};
  return {std::begin(kThreadRankCounts), std::end(kThreadRankCounts)};
}

// Input of `rank` for one op: the kit's reference patterns, periodic in kPeriod.
HostTensor Input(chorus_dtype dtype, Pattern pattern, int rank, size_t count, size_t offset = 0) {
  HostTensor t(dtype, count);
  if (count == 0) return t;
  HostTensor period(dtype, std::min(count, kPeriod));
  period.Fill(pattern, static_cast<size_t>(rank), offset);
  std::memcpy(t.data(), period.data(), period.bytes());
  t.Repeat(period.count());
  return t;
}

std::string Mismatch(const HostTensor& actual, const HostTensor& expected,
                     const std::string& what) {
  const auto result = SameValues(actual, expected);
  return result ? "" : what + ": " + result.message();
}

std::string Describe(const char* op, chorus_dtype dtype, size_t count, const char* extra = "") {
  std::ostringstream s;
  s << op << " " << DtypeName(dtype) << " count " << count << extra;
  return s.str();
}

std::string AllReduceBody(Rank& rank, int id, int size) {
  for (chorus_dtype dtype : Dtypes()) {
    for (chorus_reduce_op op : PluginReduceOps()) {
      const Pattern pattern = PatternFor(op);
      for (size_t count : kCounts) {
        std::vector<HostTensor> inputs;
        for (int r = 0; r < size; ++r) inputs.push_back(Input(dtype, pattern, r, count));
        const HostTensor expected = ExpectedReduce(op, inputs);
        for (bool in_place : {false, true}) {
          HostTensor send = inputs[static_cast<size_t>(id)];
          HostTensor recv(dtype, count);
          chorus_all_reduce_args args{};
          args.struct_size = sizeof(args);
          args.send = send.data();
          args.recv = in_place ? send.data() : recv.data();
          args.count = count;
          args.dtype = dtype;
          args.op = op;
          chorus_request* request = nullptr;
          const std::string what =
              Describe("all_reduce", dtype, count, in_place ? " in place" : "") + " " +
              ReduceOpName(op);
          std::string failure =
              rank.Finish(rank.api().all_reduce(rank.handle(), &args, &request), request, what);
          if (failure.empty()) failure = Mismatch(in_place ? send : recv, expected, what);
          if (!failure.empty()) return failure;
        }
      }
    }
  }
  return "";
}

std::string BroadcastBody(Rank& rank, int id, int size) {
  if (rank.api().broadcast == nullptr) return "";
  for (chorus_dtype dtype : Dtypes()) {
    for (size_t count : kCounts) {
      for (int root = 0; root < size; ++root) {
        const HostTensor expected = Input(dtype, Pattern::kData, root, count);
        HostTensor data = id == root ? expected : HostTensor(dtype, count);
        chorus_collective_broadcast_args args{};
        args.struct_size = sizeof(args);
        args.data = data.data();
        args.count = count;
        args.dtype = dtype;
        args.root = root;
        chorus_request* request = nullptr;
        const std::string what =
            Describe("broadcast", dtype, count) + " from rank " + std::to_string(root);
        std::string failure =
            rank.Finish(rank.api().broadcast(rank.handle(), &args, &request), request, what);
        if (failure.empty()) failure = Mismatch(data, expected, what);
        if (!failure.empty()) return failure;
      }
    }
  }
  return "";
}

std::string AllGatherBody(Rank& rank, int id, int size) {
  if (rank.api().all_gather == nullptr) return "";
  for (chorus_dtype dtype : Dtypes()) {
    for (size_t count : kCounts) {
      const size_t element = chorus_dtype_size(dtype);
      HostTensor expected(dtype, count * static_cast<size_t>(size));
      for (int r = 0; r < size; ++r) {
        const HostTensor block = Input(dtype, Pattern::kData, r, count);
        if (count > 0) {
          std::memcpy(
              static_cast<char*>(expected.data()) + static_cast<size_t>(r) * count * element,
              block.data(), block.bytes());
        }
      }
      const HostTensor send = Input(dtype, Pattern::kData, id, count);
      HostTensor recv(dtype, count * static_cast<size_t>(size));
      chorus_collective_all_gather_args args{};
      args.struct_size = sizeof(args);
      args.send = send.data();
      args.recv = recv.data();
      args.count = count;
      args.dtype = dtype;
      chorus_request* request = nullptr;
      const std::string what = Describe("all_gather", dtype, count);
      std::string failure =
          rank.Finish(rank.api().all_gather(rank.handle(), &args, &request), request, what);
      if (failure.empty()) failure = Mismatch(recv, expected, what);
      if (!failure.empty()) return failure;
    }
  }
  return "";
}

std::string ReduceScatterBody(Rank& rank, int id, int size) {
  if (rank.api().reduce_scatter == nullptr) return "";
  for (chorus_dtype dtype : Dtypes()) {
    for (chorus_reduce_op op : PluginReduceOps()) {
      const Pattern pattern = PatternFor(op);
      for (size_t count : kCounts) {
        const size_t total = count * static_cast<size_t>(size);
        // Block id of every rank's input, reduced, is what this rank must receive.
        std::vector<HostTensor> blocks;
        for (int r = 0; r < size; ++r) {
          blocks.push_back(Input(dtype, pattern, r, count, static_cast<size_t>(id) * count));
        }
        const HostTensor expected = ExpectedReduce(op, blocks);
        const HostTensor send = Input(dtype, pattern, id, total);
        HostTensor recv(dtype, count);
        chorus_reduce_scatter_args args{};
        args.struct_size = sizeof(args);
        args.send = send.data();
        args.recv = recv.data();
        args.recv_count = count;
        args.dtype = dtype;
        args.op = op;
        chorus_request* request = nullptr;
        const std::string what = Describe("reduce_scatter", dtype, count) + " " + ReduceOpName(op);
        std::string failure =
            rank.Finish(rank.api().reduce_scatter(rank.handle(), &args, &request), request, what);
        if (failure.empty()) failure = Mismatch(recv, expected, what);
        if (!failure.empty()) return failure;
      }
    }
  }
  return "";
}

std::string BarrierBody(Rank& rank, int, int) {
  if (rank.api().barrier == nullptr) return "";
  for (int i = 0; i < 3; ++i) {
    chorus_request* request = nullptr;
    const std::string failure =
        rank.Finish(rank.api().barrier(rank.handle(), &request), request, "barrier");
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
    if (request != nullptr) return what + ": returned a request instead of failing";
    if (status != CHORUS_INVALID_ARGUMENT && status != CHORUS_UNSUPPORTED) {
      return what + ": returned " + std::string(StatusName(status)) +
             ", expected INVALID_ARGUMENT or UNSUPPORTED";
    }
    if (suite.LastError().empty()) return what + ": no last_error() message";
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
  return rank.Finish(rank.api().barrier(rank.handle(), &request), request,
                     "barrier after the bad calls");
}

// Skips the calling test when the collective cannot run on host memory here (a GPU collective
// on its own, or on a machine without the hardware): create says UNSUPPORTED or UNAVAILABLE.
bool SkipUnlessHostMemoryWorks(const Suite& suite) {
  if (suite.options().job_store) return false;
  Rank probe(suite, MakeInProcessStore(), 0, 1);
  const chorus_status status = probe.create_status();
  if (status != CHORUS_UNSUPPORTED && status != CHORUS_UNAVAILABLE) return false;
  std::cout << "the collective does not run on host memory here (create said " << StatusName(status)
            << ": " << probe.create_error()
            << "); this kit checks collectives on host memory only\n";
  return true;
}

void AddRankTest(const SuitePtr& suite, const std::string& name,
                 std::string (*body)(Rank&, int, int)) {
  AddTest("Collective", name, [suite, body] {
    if (SkipUnlessHostMemoryWorks(*suite)) GTEST_SKIP() << "no host-memory collective here";
    for (int size : RankCounts(*suite)) {
      SCOPED_TRACE(std::to_string(size) + " ranks");
      const std::string failures = RunRanks(*suite, size, body);
      EXPECT_EQ(failures, "") << "with " << size << " ranks";
    }
  });
}

}  // namespace

void RegisterCollectiveTests(const SuitePtr& suite) {
  if (suite->plugin().collective() == nullptr) return;
  AddRankTest(suite, "AllReduceEveryDtypeOpAndCount", AllReduceBody);
  AddRankTest(suite, "BroadcastEveryDtypeCountAndRoot", BroadcastBody);
  AddRankTest(suite, "AllGatherEveryDtypeAndCount", AllGatherBody);
  AddRankTest(suite, "ReduceScatterEveryDtypeOpAndCount", ReduceScatterBody);
  AddRankTest(suite, "RepeatedBarriers", BarrierBody);
  AddTest("Collective", "BadArgumentsFailOnTheCallingRank", [suite] {
    if (SkipUnlessHostMemoryWorks(*suite)) GTEST_SKIP() << "no host-memory collective here";
    for (int size : RankCounts(*suite)) {
      const std::string failures = RunRanks(
          *suite, size, [&](Rank& rank, int, int) { return BadArgumentsBody(*suite, rank); });
      EXPECT_EQ(failures, "") << "with " << size << " ranks";
    }
  });
  AddTest("Collective", "RepeatedCreateAndDestroy", [suite] {
    if (SkipUnlessHostMemoryWorks(*suite)) GTEST_SKIP() << "no host-memory collective here";
    for (int round = 0; round < 3; ++round) {
      for (int size : RankCounts(*suite)) {
        const std::string failures =
            RunRanks(*suite, size, [](Rank& rank, int, int) -> std::string {
              float value = 1;
              chorus_all_reduce_args args{};
              args.struct_size = sizeof(args);
              args.send = &value;
              args.recv = &value;
              args.count = 1;
              args.dtype = CHORUS_F32;
              args.op = CHORUS_REDUCE_SUM;
              chorus_request* request = nullptr;
              return rank.Finish(rank.api().all_reduce(rank.handle(), &args, &request), request,
                                 "all_reduce of 1");
            });
        EXPECT_EQ(failures, "") << "round " << round << ", " << size << " ranks";
      }
    }
  });
  // Rank 0 all-reduces alone (rank 1 never joins); another thread aborts rank 0's communicator:
  // the call must end with ABORTED (or PEER_LOST/TIMEOUT, which some libraries report) well
  // before the 60 s time-out. Thread mode only: a job's ranks cannot be told to stay away.
  AddTest("Collective", "AbortEndsAPendingOperation", [suite] {
    if (suite->options().job_store) GTEST_SKIP() << "runs with ranks as threads only";
    if (SkipUnlessHostMemoryWorks(*suite)) GTEST_SKIP() << "no host-memory collective here";
    if (suite->plugin().collective()->abort == nullptr) GTEST_SKIP() << "no abort slot";
    const auto started = std::chrono::steady_clock::now();
    const std::string failures = RunRanks(*suite, 2, [&](Rank& rank, int id, int) -> std::string {
      if (id == 1) return "";
      std::vector<float> data(1 << 16, 1.0f);
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        rank.api().abort(rank.handle());
      });
      chorus_all_reduce_args args{};
      args.struct_size = sizeof(args);
      args.send = data.data();
      args.recv = data.data();
      args.count = data.size();
      args.dtype = CHORUS_F32;
      args.op = CHORUS_REDUCE_SUM;
      chorus_request* request = nullptr;
      chorus_status status = rank.api().all_reduce(rank.handle(), &args, &request);
      if (status == CHORUS_OK && request != nullptr) {
        status = suite->plugin().table().request_wait(request, kTimeoutMs);
        if (status != CHORUS_TIMEOUT) suite->plugin().table().request_free(request);
      }
      aborter.join();
      if (status == CHORUS_OK) return "an all_reduce with a missing rank succeeded";
      if (status == CHORUS_INVALID_ARGUMENT || status == CHORUS_INTERNAL) {
        return std::string("the aborted all_reduce returned ") + StatusName(status) +
               ", expected ABORTED";
      }
      return "";
    });
    EXPECT_EQ(failures, "");
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30))
        << "abort did not end the pending operation promptly";
  });
}

}  // namespace chorus::conformance::internal
