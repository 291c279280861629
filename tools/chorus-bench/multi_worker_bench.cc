#include "multi_worker_bench.h"

#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "auto_backend.h"
#include "collective_run.h"
#include "list_text.h"
#include "metrics.h"
#include "results_writer.h"
#include "rule_suggestion.h"
#include "sizes.h"
#include "worker_job.h"

namespace chorus::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Bad input the user can fix: exit code 2.
using UsageError = std::invalid_argument;

}  // namespace

void CheckCollectiveBackends(const std::vector<std::string>& backends) {
  const auto available = Registry::Global().CollectiveNames();
  for (const auto& name : backends) {
    if (IsAutoBackend(name) || name == "RING" || name == "NCCL") continue;  // requests, not names
    if (name == "mpi" && !StartedByMpirun()) {
      throw UsageError(
          "backend 'mpi' works only in processes started by mpirun; run e.g. "
          "'mpirun -n 2 chorus-bench --backends mpi,core_ring' (without -n)");
    }
    if (name.find('+') != std::string::npos) {
      try {
        CanonicalCollectiveName(Registry::Global(), name);
      } catch (const Error& e) {
        throw UsageError("backend '" + name + "': " + e.what());
      }
      continue;
    }
    // The registry's lookup, so every name a communicator takes (ring@tcp for core_ring, a
    // plugin's name for its one collective) is taken here too.
    try {
      Registry::Global().FindCollective(name, "--backends");
    } catch (const Error&) {
      throw UsageError("unknown backend '" + name +
                       "'; the collectives available are: " + JoinNames(available) +
                       " (plugins are searched in CHORUS_PLUGIN_PATH and the install's plugin "
                       "folder; chorus-info lists them)");
    }
  }
}

namespace {

chorus_collective_op ToOp(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return CHORUS_OP_ALL_GATHER;
    case CollectiveKind::kBroadcast:
      return CHORUS_OP_BROADCAST;
    case CollectiveKind::kReduceScatter:
      return CHORUS_OP_REDUCE_SCATTER;
    default:
      return CHORUS_OP_ALL_REDUCE;
  }
}

// "out.csv" -> "out.regret.csv".
std::string RegretCsvPath(const std::string& csv) {
  const bool suffix = csv.size() > 4 && csv.compare(csv.size() - 4, 4, ".csv") == 0;
  return (suffix ? csv.substr(0, csv.size() - 4) : csv) + ".regret.csv";
}

std::unique_ptr<Communicator> Connect(const WorkerJob& job, const std::string& backend,
                                      const JobShape& shape, double timeout_seconds) {
  CommunicatorConfig config;
  config.rank = job.rank;
  config.size = job.size;
  config.store = job.store;
  config.name = "bench_" + backend;
  config.timeout_seconds = timeout_seconds;
  config.task_names = job.task_names;
  config.health = job.health;       // a failure names the worker that caused it
  config.check_signatures = false;  // timing only the operation, as CHORUS_CHECK_COLLECTIVES=0
  // Peers reach this worker at its cluster address's host (as MultiWorkerMirroredStrategy), and
  // its machine is CHORUS_HOST_ID's (--hosts sets one per worker) or this machine's.
  config.address = job.host;
  config.host_id = HostIdentity();
  return Communicator::Create(Registry::Global(),
                              PlanForBackend(Registry::Global(), backend, shape), config);
}

// How the job's workers sit on hosts (each worker's CHORUS_HOST_ID or machine), as
// MultiWorkerMirroredStrategy sees it: what AUTO's scores look at.
JobShape ShapeOfJob(WorkerJob& job, double timeout_seconds) {
  const std::string prefix = "bench/host/";
  job.store->Set(prefix + std::to_string(job.rank), ToBytes(HostIdentity()));
  std::vector<std::string> hosts;
  for (int r = 0; r < job.size; ++r) {
    hosts.push_back(ToString(
        job.store->Get(prefix + std::to_string(r),
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)))));
  }
  return JobShape::FromHostIds(hosts, "host");
}

// What one rank measured for a backend, placement and size.
struct Samples {
  std::vector<double> times_us;
  uint64_t wrong = 0;
};

std::string Serialize(const Samples& s) {
  std::ostringstream out;
  out.precision(17);
  out << s.wrong;
  for (double t : s.times_us) out << ' ' << t;
  return out.str();
}

Samples Deserialize(const std::string& text) {
  std::istringstream in(text);
  Samples s;
  in >> s.wrong;
  for (double t; in >> t;) s.times_us.push_back(t);
  return s;
}

// Worker 0 gets every rank's samples: an iteration takes as long as its slowest rank, the
// reported time is the median of that, #wrong is summed over the ranks.
std::optional<Samples> GatherSamples(WorkerJob& job, uint64_t sequence, const Samples& mine,
                                     double timeout_seconds) {
  const std::string prefix = "bench/samples/" + std::to_string(sequence) + "/";
  if (job.rank != 0) {
    job.store->Set(prefix + std::to_string(job.rank), ToBytes(Serialize(mine)));
    return std::nullopt;
  }
  Samples all = mine;
  for (int r = 1; r < job.size; ++r) {
    const std::string key = prefix + std::to_string(r);
    const Samples theirs = Deserialize(ToString(job.store->Get(
        key, std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)))));
    job.store->Remove(key);
    all.wrong += theirs.wrong;
    for (size_t i = 0; i < all.times_us.size() && i < theirs.times_us.size(); ++i) {
      all.times_us[i] = std::max(all.times_us[i], theirs.times_us[i]);
    }
  }
  return all;
}

// warm-up + iters iterations, each between barriers; the last one's result is checked.
void Measure(const BenchOptions& options, const RunSpec& spec, RunBuffers& buffers,
             Communicator& comm, Samples& samples) {
  // Under autotuning (CHORUS_AUTOTUNE=1) the first calls of a size band time the candidates in
  // turn: they are warm-up too, so that the figures are those of the decision.
  for (int tuning_calls = 0; tuning_calls < 100000; ++tuning_calls) {
    if (!comm.Tuning(ToOp(spec.kind), spec.count * chorus_dtype_size(spec.dtype))) break;
    PrepareIteration(spec, buffers, false);
    comm.Barrier();  // as the timed iterations: the tuning times the operation, not the skew
    RunOperation(spec, buffers, comm);
  }
  const int total = options.warmup_iters + options.iters;
  for (int it = 0; it < total; ++it) {
    const bool checked = it == total - 1;
    PrepareIteration(spec, buffers, checked);
    comm.Barrier();
    const auto start = Clock::now();
    RunOperation(spec, buffers, comm);
    const std::chrono::duration<double, std::micro> elapsed = Clock::now() - start;
    if (it >= options.warmup_iters) samples.times_us.push_back(elapsed.count());
    if (checked) samples.wrong = std::max(samples.wrong, CountWrongElements(spec, buffers));
  }
}

Measurement ToMeasurement(const std::string& backend, const RunSpec& spec, uint64_t bytes,
                          const Samples& samples) {
  Measurement m;
  m.backend = backend;
  m.op = spec.kind;
  m.bytes = bytes;
  m.count = spec.count;
  m.dtype = DtypeName(spec.dtype);
  const bool reduces =
      spec.kind == CollectiveKind::kAllReduce || spec.kind == CollectiveKind::kReduceScatter;
  m.reduce_op = reduces ? ReduceOpName(spec.reduce_op) : "";
  m.root = spec.kind == CollectiveKind::kBroadcast ? spec.root : -1;
  m.in_place = spec.in_place;
  m.time_us = Median(samples.times_us);
  m.algbw_gbps = AlgorithmBandwidthGbps(bytes, m.time_us);
  m.busbw_gbps = m.algbw_gbps * BusBandwidthFactor(spec.kind, spec.ranks);
  m.wrong = samples.wrong;
  return m;
}

// The suggested rules as a tuning file for jobs of this one's shape (selection.h).
void WriteTuningFile(const BenchOptions& options, const WorkerJob& job,
                     const std::vector<std::string>& backends, const std::string& rules) {
  if (rules.empty()) {
    throw std::runtime_error("--tuning-file " + options.tuning_file +
                             ": no operation CHORUS_ALGORITHM routes was measured, so there are no "
                             "rules to write");
  }
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  const std::string text = TuningFile::Write(
      job.size, options.hosts, ParseAlgorithmRules(rules, "--tuning-file"),
      std::string("written by chorus-bench --tuning-file on ") + date + "\nthe fastest of " +
          JoinNames(backends) + " at each size measured (" + job.source + ")");
  std::ofstream out(options.tuning_file);
  out << text;
  if (!out) {
    throw std::runtime_error("--tuning-file " + options.tuning_file + ": cannot write the file");
  }
  std::cout << "# wrote " << options.tuning_file << " (CHORUS_TUNING_FILE=" << options.tuning_file
            << " applies it to jobs of " << job.size << " workers on " << options.hosts
            << (options.hosts == 1 ? " host)\n" : " hosts)\n");
}

int Run(const BenchOptions& options, WorkerJob& job) {
  const JobShape shape = ShapeOfJob(job, options.timeout_seconds);
  std::vector<std::string> backends = options.backends;
  if (options.auto_mode) {
    if (backends.empty()) backends = AutoCandidates(Registry::Global(), shape, StartedByMpirun());
    std::erase_if(backends, IsAutoBackend);
    backends.insert(backends.begin(), "auto");
  } else if (backends.empty()) {
    backends = DefaultBackends();
  }
  if (options.workers > 0 && options.workers != job.size) {
    throw UsageError("-n " + std::to_string(options.workers) + " but the job (" + job.source +
                     ") has " + std::to_string(job.size) + " workers");
  }
  if (options.root >= job.size) {
    throw UsageError("--root " + std::to_string(options.root) + " is not a rank of a job of " +
                     std::to_string(job.size) + " workers");
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  for (const auto& backend : backends) {
    comms.push_back(Connect(job, backend, shape, options.timeout_seconds));
  }
  const bool leader = job.rank == 0;
  ResultsWriter writer(
      options.csv_path, options.plot_path,
      "chorus-bench: busbw, " + std::to_string(job.size) + " workers, " + DtypeName(options.dtype));
  if (leader) {
    writer.Comment("chorus-bench: " + std::to_string(job.size) + " workers (" + job.source + "), " +
                   shape.Describe() + ", backends " + JoinNames(backends));
    for (size_t b = 0; b < backends.size(); ++b) {
      if (IsAutoBackend(backends[b])) {
        writer.Comment("auto: " + comms[b]->plan().source);
      }
    }
    writer.Comment("dtype " + std::string(DtypeName(options.dtype)) + ", reduce op " +
                   ReduceOpName(options.reduce_op) + ", warm-up " +
                   std::to_string(options.warmup_iters) + ", iterations " +
                   std::to_string(options.iters) + " x " + std::to_string(options.repeats) +
                   " repeats, backends alternate per size and repeat");
    writer.Comment(
        "time: median over iterations of the slowest worker's time, each iteration "
        "timed between barriers; signature checks off (check_signatures=false)");
    writer.Comment(
        "algbw = size / time; busbw = algbw x 2(n-1)/n all_reduce, (n-1)/n "
        "all_gather and reduce_scatter (size: all n blocks), 1 broadcast");
  }
  const size_t element = chorus_dtype_size(options.dtype);
  const auto sizes = SizeSweep(options.min_bytes, options.max_bytes, options.factor);
  uint64_t sequence = 0;
  for (CollectiveKind kind : options.ops) {
    if (leader) {
      writer.BeginOperation(std::string(CollectiveName(kind)) +
                            (kind == CollectiveKind::kBroadcast
                                 ? " (in place only: the Communicator broadcasts in one buffer)"
                                 : ""));
    }
    RunBuffers buffers;
    std::vector<bool> placements = {false, true};
    if (kind == CollectiveKind::kBroadcast) placements = {true};
    for (size_t si = 0; si < sizes.size(); ++si) {
      const RowLayout layout = LayoutFor(kind, sizes[si], element, job.size);
      RunSpec spec{kind,     options.dtype, options.reduce_op, options.root,
                   job.rank, job.size,      layout.count,      false};
      FillInputs(spec, buffers);
      std::map<std::pair<size_t, bool>, Samples> samples;
      for (int repeat = 0; repeat < options.repeats; ++repeat) {
        for (size_t k = 0; k < backends.size(); ++k) {
          const size_t b = (k + si + static_cast<size_t>(repeat)) % backends.size();
          for (bool in_place : placements) {
            spec.in_place = in_place;
            try {
              Measure(options, spec, buffers, *comms[b], samples[{b, in_place}]);
            } catch (const Error& e) {
              const std::string what =
                  "backend '" + backends[b] + "' failed " + CollectiveName(kind) + " of " +
                  std::to_string(layout.count) + " " + DtypeName(options.dtype) + ": " + e.what();
              if (e.status() == CHORUS_UNSUPPORTED || e.status() == CHORUS_INVALID_ARGUMENT) {
                throw UsageError(what + " (choose another -d, -o or backend)");
              }
              throw;
            }
          }
        }
      }
      for (size_t b = 0; b < backends.size(); ++b) {
        std::map<bool, Measurement> row;
        for (bool in_place : placements) {
          spec.in_place = in_place;
          const auto all =
              GatherSamples(job, sequence++, samples[{b, in_place}], options.timeout_seconds);
          if (all) row[in_place] = ToMeasurement(backends[b], spec, layout.bytes, *all);
        }
        if (leader) writer.Add(row.count(false) ? &row[false] : nullptr, &row[true]);
      }
      if (leader) {
        writer.Progress(std::string(CollectiveName(kind)) + " size " + std::to_string(si + 1) +
                        "/" + std::to_string(sizes.size()) + " (" + FormatSize(sizes[si]) + ")");
      }
    }
  }
  comms.front()->Barrier();
  if (!leader) return 0;
  writer.Finish();
  for (size_t b = 0; b < backends.size(); ++b) {
    if (!IsAutoBackend(backends[b])) continue;
    for (const auto& line : comms[b]->AutotuneDecisions())
      std::cout << "# autotuned " << line << "\n";
    const auto regret = RegretRows(writer.rows(), [&](CollectiveKind kind, uint64_t bytes) {
      return comms[b]->BackendFor(ToOp(kind), bytes, options.dtype);
    });
    std::cout << RegretTable(regret);
    if (!options.csv_path.empty()) {
      const std::string path = RegretCsvPath(options.csv_path);
      std::ofstream out(path);
      out << RegretCsv(regret);
      if (!out) throw std::runtime_error("cannot write " + path);
    }
    break;
  }
  if (options.suggest_rules) {
    const std::string rules = SuggestAlgorithmRules(writer.rows());
    std::cout << "#\n# the fastest backend at each size, as rules (--suggest-rules):\n"
              << "CHORUS_ALGORITHM='" << rules << "'\n";
    if (!options.tuning_file.empty()) WriteTuningFile(options, job, backends, rules);
  }
  if (writer.total_wrong() > 0) {
    std::cerr << "chorus-bench: " << writer.total_wrong()
              << " wrong elements in total (see the #wrong columns)\n";
    return 1;
  }
  return 0;
}

}  // namespace

int RunMultiWorkerBench(const BenchOptions& options) {
  return RunAsWorker(
      options.timeout_seconds,
      [&] {
        CheckCollectiveBackends(options.backends.empty() ? DefaultBackends() : options.backends);
      },
      [&](WorkerJob& job) { return Run(options, job); });
}

}  // namespace chorus::bench
