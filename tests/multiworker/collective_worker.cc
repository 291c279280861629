// One worker of a multi-process collective test, started by multiworker_test with TF_CONFIG set.
//   collective_worker sweep <backend> [counts...]   every op x dtype x count, checked exactly
//   collective_worker mismatch <backend>            worker 1 passes another count: both must
//                                                   report the mismatch
//   collective_worker mwms <backend>                MultiWorkerMirroredStrategy, one all-reduce
//                                                   of 1001 floats, checked
//   collective_worker unchecked <backend> <op> [key=value...]
//                                                   the signature check off and the options
//                                                   given: worker 1 passes another count to op;
//                                                   the backend must fail, not crash
//   collective_worker choices <backend> <choice of worker 0> <choice of worker 1> ...
//                                                   worker i applies its choice (NAME=value: a
//                                                   variable; option:key=value: a collective
//                                                   option; -: none), then creates the
//                                                   communicator as MultiWorkerMirroredStrategy
//                                                   plans it and runs a barrier
//   collective_worker long <backend> <started-dir> <timeout-s>
//                                                   MultiWorkerMirroredStrategy, then 1 MiB
//                                                   all-reduces until one fails (the test kills
//                                                   or stops a worker meanwhile); prints the
//                                                   error
// Exit codes: 0 as expected, 1 wrong values or unexpected success, 3 a chorus error (printed).
#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/distribute/multi_worker_mirrored_strategy.h>
#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/rendezvous.h>
#include <unistd.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using chorus::Communicator;

// Element i of rank r: small integers, exact in every dtype (sums of 4 ranks stay below 127).
double InputValue(size_t i, int rank) { return static_cast<double>((i + rank) % 7 + 1); }
// For PROD: 1 or 2, so a product of 4 ranks (16) fits i8.
double ProdInputValue(size_t i, int rank) { return static_cast<double>((i + rank) % 2 + 1); }

// `v` as the dtype holds it (a mean like 14/3 is rounded once, to the dtype's precision).
double RoundTo(chorus_dtype dtype, double v) {
  unsigned char slot[8];
  chorus::sdk::StoreElement(slot, 0, dtype, v);
  return chorus::sdk::LoadElement(slot, 0, dtype);
}

double Combine(chorus_reduce_op op, double a, double b) {
  switch (op) {
    case CHORUS_REDUCE_PROD:
      return a * b;
    case CHORUS_REDUCE_MIN:
      return std::min(a, b);
    case CHORUS_REDUCE_MAX:
      return std::max(a, b);
    default:
      return a + b;
  }
}

struct Checker {
  std::string backend;
  int rank = 0;
  int wrong = 0;
  int checks = 0;
  void Expect(const std::string& what, size_t i, double got, double want) {
    ++checks;
    if (got == want) return;
    if (++wrong <= 5) {
      std::cerr << backend << " rank " << rank << ": " << what << " element " << i << " is " << got
                << ", expected " << want << "\n";
    }
  }
};

std::vector<unsigned char> Filled(size_t count, chorus_dtype dtype, int rank, size_t offset = 0) {
  std::vector<unsigned char> buffer(count * chorus_dtype_size(dtype));
  for (size_t i = 0; i < count; ++i)
    chorus::sdk::StoreElement(buffer.data(), i, dtype, InputValue(i + offset, rank));
  return buffer;
}

void Sweep(Communicator& comm, Checker& check, const std::vector<size_t>& counts) {
  const int n = comm.size();
  const chorus_dtype dtypes[] = {CHORUS_F32, CHORUS_F64, CHORUS_F16, CHORUS_BF16,
                                 CHORUS_I32, CHORUS_I64, CHORUS_U8,  CHORUS_I8};
  for (chorus_dtype dtype : dtypes) {
    const std::string d = chorus::DtypeName(dtype);
    for (size_t count : counts) {
      // The large count for two dtypes only (one of them converted through f32 on the way): the
      // others' code paths are the same, and the suite must stay fast on 2 cores.
      if (count > 100000 && dtype != CHORUS_F32 && dtype != CHORUS_BF16) continue;
      const std::string c = " " + d + " x" + std::to_string(count);
      // All-reduce: SUM in place and out of place, then the other ops.
      for (chorus_reduce_op op : {CHORUS_REDUCE_SUM, CHORUS_REDUCE_PROD, CHORUS_REDUCE_MIN,
                                  CHORUS_REDUCE_MAX, CHORUS_REDUCE_MEAN}) {
        if (op == CHORUS_REDUCE_MEAN && dtype != CHORUS_F32 && dtype != CHORUS_F64) continue;
        const auto value = op == CHORUS_REDUCE_PROD ? ProdInputValue : InputValue;
        std::vector<unsigned char> data(count * chorus_dtype_size(dtype));
        for (size_t i = 0; i < count; ++i)
          chorus::sdk::StoreElement(data.data(), i, dtype, value(i, comm.rank()));
        std::vector<unsigned char> out(data.size());
        const bool in_place = op == CHORUS_REDUCE_SUM || op == CHORUS_REDUCE_MAX;
        void* result = in_place ? data.data() : out.data();
        comm.AllReduce(data.data(), result, count, dtype, op);
        for (size_t i = 0; i < count; ++i) {
          double want = value(i, 0);
          for (int r = 1; r < n; ++r) want = Combine(op, want, value(i, r));
          if (op == CHORUS_REDUCE_MEAN) want = RoundTo(dtype, want / n);
          check.Expect(std::string("all_reduce ") + chorus::ReduceOpName(op) + c, i,
                       chorus::sdk::LoadElement(result, i, dtype), want);
        }
      }
      // Broadcast from every root.
      for (int root = 0; root < n; ++root) {
        auto data = Filled(count, dtype, comm.rank() == root ? 100 : comm.rank());
        comm.Broadcast(data.data(), count, dtype, root);
        for (size_t i = 0; i < count; ++i) {
          check.Expect("broadcast from " + std::to_string(root) + c, i,
                       chorus::sdk::LoadElement(data.data(), i, dtype), InputValue(i, 100));
        }
      }
      // All-gather: rank r's block at r * count.
      {
        auto mine = Filled(count, dtype, comm.rank());
        std::vector<unsigned char> all(mine.size() * static_cast<size_t>(n));
        comm.AllGather(mine.data(), all.data(), count, dtype);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            check.Expect(
                "all_gather" + c, r * count + i,
                chorus::sdk::LoadElement(all.data(), static_cast<size_t>(r) * count + i, dtype),
                InputValue(i, r));
          }
        }
      }
      // Reduce-scatter (SUM): rank r gets the sum of block r.
      {
        auto send = Filled(count * static_cast<size_t>(n), dtype, comm.rank());
        std::vector<unsigned char> recv(count * chorus_dtype_size(dtype));
        comm.ReduceScatter(send.data(), recv.data(), count, dtype, CHORUS_REDUCE_SUM);
        for (size_t i = 0; i < count; ++i) {
          const size_t at = static_cast<size_t>(comm.rank()) * count + i;
          double want = 0;
          for (int r = 0; r < n; ++r) want += InputValue(at, r);
          check.Expect("reduce_scatter" + c, i, chorus::sdk::LoadElement(recv.data(), i, dtype),
                       want);
        }
      }
    }
  }
  comm.Barrier();
}

// How a test worker's communicator is made; the defaults are the sweep's.
struct ConnectSettings {
  double timeout_seconds = 60;
  bool check_signatures = true;
  chorus::Options options;  // handed to the collective's create
  // Empty: the communicator runs everything on the collective named by the command line.
  // Otherwise the plan MultiWorkerMirroredStrategy would make (CHORUS_COMMUNICATION,
  // CHORUS_ALGORITHM, ...).
  bool plan_from_environment = false;
};

std::unique_ptr<Communicator> Connect(const std::string& backend,
                                      std::unique_ptr<chorus::TcpStoreServer>* server,
                                      const ConnectSettings& settings = {}) {
  const chorus::TFConfigClusterResolver cluster;
  const auto leader = cluster.leader_address();
  const auto colon = leader.rfind(':');
  const std::string host = leader.substr(0, colon);
  const auto port = static_cast<uint16_t>(std::stoi(leader.substr(colon + 1)));
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(settings.timeout_seconds * 1000));
  if (cluster.is_leader()) *server = chorus::TcpStoreServer::Start(host, port, timeout);
  chorus::CommunicatorConfig config;
  config.rank = cluster.id_in_cluster();
  config.size = cluster.num_workers();
  config.store = chorus::ConnectTcpStore(host, port, timeout);
  config.timeout_seconds = settings.timeout_seconds;
  config.check_signatures = settings.check_signatures;
  config.options = settings.options;
  for (int w = 0; w < config.size; ++w) config.task_names.push_back(cluster.TaskNameOf(w));
  // As MultiWorkerMirroredStrategy does: a failure names the worker that caused it. The
  // communicator holds the health, and goes before the server (sweep and mismatch end with every
  // worker done, so the leader's server needs no StopWaitingFor).
  chorus::JobHealthOptions health;
  health.host = host;
  health.port = port;
  health.leader_name = cluster.TaskNameOf(0);
  health.task_name = cluster.task_name();
  health.timeout = std::chrono::seconds(60);
  config.health = std::make_shared<chorus::JobHealth>(health);
  if (!settings.plan_from_environment) {
    return Communicator::Create(chorus::Registry::Global(), backend, config);
  }
  chorus::JobShape shape;
  shape.ranks = config.size;
  shape.ranks_per_host = config.size;
  const auto plan = chorus::PlanCollectives(chorus::Registry::Global(),
                                            chorus::CommunicationImplementation::kAuto, shape);
  return Communicator::Create(chorus::Registry::Global(), plan, config);
}

// "key=value" as an option.
std::pair<std::string, std::string> OptionOf(const std::string& text) {
  const auto equals = text.find('=');
  if (equals == std::string::npos) throw std::invalid_argument("not key=value: " + text);
  return {text.substr(0, equals), text.substr(equals + 1)};
}

// Runs `op` on `count` f32 elements on every rank, with the root 0 where it has one.
void RunOperation(Communicator& comm, const std::string& op, size_t count) {
  std::vector<float> data(count * static_cast<size_t>(comm.size()), 1.0f);
  std::vector<float> out(data.size());
  if (op == "all_reduce") {
    comm.AllReduce(data.data(), data.data(), count, CHORUS_F32, CHORUS_REDUCE_SUM);
  } else if (op == "broadcast") {
    comm.Broadcast(data.data(), count, CHORUS_F32, 0);
  } else if (op == "all_gather") {
    comm.AllGather(data.data(), out.data(), count, CHORUS_F32);
  } else if (op == "reduce_scatter") {
    comm.ReduceScatter(data.data(), out.data(), count, CHORUS_F32, CHORUS_REDUCE_SUM);
  } else {
    throw std::invalid_argument("unknown operation " + op);
  }
}

int Run(int argc, char** argv) {
  const std::string mode = argv[1];
  const std::string backend = argv[2];
  if (mode == "sweep") {
    std::unique_ptr<chorus::TcpStoreServer> server;
    auto comm = Connect(backend, &server);
    std::vector<size_t> counts;
    for (int i = 3; i < argc; ++i) counts.push_back(std::stoul(argv[i]));
    if (counts.empty()) counts = {0, 1, 1001, 262147};
    Checker check{backend, comm->rank()};
    Sweep(*comm, check, counts);
    std::cout << backend << " rank " << comm->rank() << " of " << comm->size() << ": "
              << check.checks << " elements checked, " << check.wrong << " wrong\n";
    comm->Barrier();  // the leader's store serves until everyone is done
    return check.wrong == 0 ? 0 : 1;
  }
  if (mode == "mismatch") {
    std::unique_ptr<chorus::TcpStoreServer> server;
    auto comm = Connect(backend, &server);
    std::vector<float> data(comm->rank() == 1 ? 999 : 1000, 1.0f);
    try {
      comm->AllReduce(data.data(), data.data(), data.size(), CHORUS_F32, CHORUS_REDUCE_SUM);
    } catch (const chorus::Error& e) {
      std::cout << "rank " << comm->rank() << ": " << chorus::StatusName(e.status()) << ": "
                << e.what() << "\n";
      return e.status() == CHORUS_INVALID_ARGUMENT ? 0 : 3;
    }
    std::cout << "rank " << comm->rank() << ": the mismatch went unnoticed\n";
    return 1;
  }
  if (mode == "mwms") {
    setenv("CHORUS_COMMUNICATION", backend.c_str(), 1);
    chorus::MultiWorkerMirroredStrategy strategy;
    const int workers = strategy.num_workers();
    std::vector<float> data(1001, static_cast<float>(strategy.worker_id() + 1));
    strategy.communicator()->AllReduce(data.data(), data.data(), data.size(), CHORUS_F32,
                                       CHORUS_REDUCE_SUM);
    const auto want = static_cast<float>(workers * (workers + 1) / 2);
    const bool right = std::all_of(data.begin(), data.end(), [&](float v) { return v == want; });
    std::cout << "mwms " << backend << " worker " << strategy.worker_id() << " of " << workers
              << ": " << (right ? "right" : "wrong") << "\n";
    return right ? 0 : 1;
  }
  if (mode == "unchecked" && argc >= 4) {
    // Worker 1 passes another count with the signature check off (as chorus-bench runs): the
    // backend itself must fail with an error, not crash.
    ConnectSettings settings;
    settings.timeout_seconds = chorus::DefaultTimeoutSeconds();
    settings.check_signatures = false;
    for (int i = 4; i < argc; ++i) settings.options.push_back(OptionOf(argv[i]));
    std::unique_ptr<chorus::TcpStoreServer> server;
    auto comm = Connect(backend, &server, settings);
    RunOperation(*comm, argv[3], comm->rank() == 1 ? 999 : 1000);
    std::cout << "rank " << comm->rank() << ": the mismatch went unnoticed\n";
    return 1;
  }
  if (mode == "choices" && argc >= 3) {
    // Worker i first applies argument 3 + i: "NAME=value" sets an environment variable,
    // "option:key=value" a collective option, "-" nothing. Then it creates the communicator
    // from the plan MultiWorkerMirroredStrategy would make and runs a barrier.
    const chorus::TFConfigClusterResolver cluster;
    const int index = 3 + cluster.id_in_cluster();
    const std::string choice = index < argc ? argv[index] : "-";
    ConnectSettings settings;
    settings.timeout_seconds = chorus::DefaultTimeoutSeconds();
    settings.plan_from_environment = true;
    if (choice.rfind("option:", 0) == 0) {
      settings.options.push_back(OptionOf(choice.substr(7)));
    } else if (choice != "-") {
      const auto [name, value] = OptionOf(choice);
      setenv(name.c_str(), value.c_str(), 1);
    }
    std::unique_ptr<chorus::TcpStoreServer> server;
    auto comm = Connect(backend, &server, settings);
    comm->Barrier();
    std::cout << "rank " << comm->rank() << ": created " << comm->backend() << "\n";
    return 0;
  }
  if (mode == "long" && argc >= 5) {
    setenv("CHORUS_COMMUNICATION", backend.c_str(), 1);
    chorus::CommunicationOptions options;
    options.timeout_seconds = std::stod(argv[4]);  // the test's bound for the survivors
    chorus::MultiWorkerMirroredStrategy strategy(nullptr, options);
    std::vector<float> data(256 << 10, 1.0f);  // 1 MiB
    for (int64_t step = 0;; ++step) {
      strategy.communicator()->AllReduce(data.data(), data.data(), data.size(), CHORUS_F32,
                                         CHORUS_REDUCE_MAX);
      if (step == 0) {
        std::ofstream(std::string(argv[3]) + "/started-" + std::to_string(strategy.worker_id()))
            << getpid();
      }
    }
  }
  std::cerr << "usage: collective_worker sweep|mismatch|mwms|long <backend> [...]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: collective_worker sweep|mismatch|mwms|long <backend> [...]\n";
    return 2;
  }
  // Load only the plugin under test (the builtin core_ring needs none). Besides being what a user
  // of one backend does, it keeps LeakSanitizer's exit-time scan working: with every plugin's
  // libraries mapped (gRPC, Gloo, Open MPI, CUDA, NCCL) its tracer thread crashes in a worker
  // that exits after a peer was killed.
  const std::string backend = argv[2];
  auto plugin_of = [](const std::string& collective) -> std::string {
    if (const auto at = collective.find('@'); at != std::string::npos) {
      // algorithm@transport: the core's ring and tcp are builtin; in-tree algorithms come from
      // plugins/algorithms, a transport from the plugin of its name.
      const std::string algorithm = collective.substr(0, at), transport = collective.substr(at + 1);
      std::string plugins = algorithm == "ring" ? "" : "algorithms";
      if (transport != "tcp") plugins += (plugins.empty() ? "" : ",") + transport;
      return plugins.empty() ? "none" : plugins;
    }
    return collective == "core_ring"   ? "none"
           : collective == "ring_grpc" ? "ring-grpc"
                                       : collective;
  };
  std::string plugins;
  const auto plus = backend.find('+');
  if (plus == std::string::npos) {
    plugins = plugin_of(backend);
  } else {
    plugins = "hierarchical";  // the plugin that composes two collectives by host
    for (const std::string& part : {backend.substr(0, plus), backend.substr(plus + 1)}) {
      if (part != "core_ring") plugins += std::string(",") + plugin_of(part);
    }
  }
  // CHORUS_TEST_EVERY_PLUGIN=1 leaves CHORUS_PLUGINS unset: every plugin of the build is loaded,
  // as in a user's job.
  if (std::getenv("CHORUS_TEST_EVERY_PLUGIN") == nullptr) {
    setenv("CHORUS_PLUGINS", plugins.c_str(), 0);
  }
  try {
    if (plus != std::string::npos) {
      // A hierarchical backend: the workers play two hosts (even counts, numbered round-robin
      // over the hosts, so not host by host) or one.
      const chorus::TFConfigClusterResolver cluster;
      const int hosts = cluster.num_workers() % 2 == 0 ? 2 : 1;
      const std::string host = "test-host-" + std::to_string(cluster.id_in_cluster() % hosts);
      setenv("CHORUS_HOST_ID", host.c_str(), 1);
    }
    return Run(argc, argv);
  } catch (const chorus::Error& e) {
    std::cout << "collective_worker: " << chorus::StatusName(e.status()) << ": " << e.what()
              << std::endl;
    return 3;
  } catch (const std::exception& e) {
    std::cout << "collective_worker: " << e.what() << std::endl;
    return 2;
  }
}
