#include "transport_bench.h"

#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/collective/transport_endpoint.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "list_text.h"
#include "metrics.h"
#include "p2p_measure.h"
#include "sizes.h"
#include "transport_output.h"
#include "worker_job.h"

namespace chorus::bench {

namespace {

// Bad input the user can fix: exit code 2.
using UsageError = std::invalid_argument;

// The streaming test keeps at most this many bytes in flight (a transport may stage what is in
// flight, e.g. the core's tcp), so large sizes run with fewer messages per window than --window.
constexpr uint64_t kMaxBytesInFlight = uint64_t{256} << 20;

int WindowFor(uint64_t bytes, int window) {
  if (bytes == 0) return window;
  return static_cast<int>(
      std::clamp<uint64_t>(kMaxBytesInFlight / bytes, 1, static_cast<uint64_t>(window)));
}

// The name --transports gives for the registry's messages.
constexpr const char* kTransportsFlag = "--transports";

// An endpoint and the store view it was handed (which must outlive it).
struct OpenTransport {
  std::string name;
  std::unique_ptr<CKvStore> store;
  std::unique_ptr<TransportEndpoint> endpoint;
};

OpenTransport Open(const WorkerJob& job, const std::string& name, size_t index,
                   double timeout_seconds) {
  const auto choice = Registry::Global().FindTransport(name, kTransportsFlag);
  OpenTransport open;
  open.name = name;
  open.store = std::make_unique<CKvStore>(
      WithPrefix(job.store, "bench/transport/" + std::to_string(index) + "/"));
  TransportConfig config;
  config.rank = job.rank;
  config.size = job.size;
  config.store = open.store->get();
  config.timeout_ms = static_cast<int64_t>(timeout_seconds * 1000);
  config.address = job.host;
  config.host_id = HostIdentity();
  try {
    open.endpoint = TransportEndpoint::Create(choice.plugin, *choice.api, config);
  } catch (const Error& e) {
    throw Error(e.status(), "transport '" + name + "' (plugin " + choice.plugin->name() +
                                "): creating the endpoint failed: " + e.what());
  }
  return open;
}

// Rank 1's wrong bytes of one row, added to rank 0's through the store.
uint64_t GatherWrong(WorkerJob& job, const std::string& key, uint64_t mine,
                     double timeout_seconds) {
  if (job.rank != 0) {
    job.store->Set(key, ToBytes(std::to_string(mine)));
    return mine;
  }
  const std::string theirs = ToString(
      job.store->Get(key, std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000))));
  job.store->Remove(key);
  return mine + std::stoull(theirs);
}

int Run(const BenchOptions& options, WorkerJob& job) {
  if (job.size != 2) {
    throw UsageError("--transports measures between 2 workers, but the job (" + job.source +
                     ") has " + std::to_string(job.size) +
                     "; run 'chorus-bench -n 2 --transports ...' (or a job of 2 workers)");
  }
  std::vector<OpenTransport> transports;
  for (size_t t = 0; t < options.transports.size(); ++t) {
    transports.push_back(Open(job, options.transports[t], t, options.timeout_seconds));
  }
  const bool leader = job.rank == 0;
  if (leader) {
    std::cout << "# chorus-bench: transports " << JoinNames(options.transports)
              << " point to point between 2 workers (" << job.source << ")\n"
              << "# latency: median over " << options.iters << " x " << options.repeats
              << " ping-pongs (after " << options.warmup_iters
              << " warm-up) of the round trip / 2, as ucx_perftest tag_lat's 50.0%ile\n"
              << "# bandwidth: " << options.iters << " x window x size / median time of "
              << options.repeats << " streams of that many messages, as ucx_perftest tag_bw's "
              << "overall: up to window = " << options.window
              << " sends in flight (at most 256M), one receive posted at a time, one 8-byte ack "
                 "at the end; MB = 2^20 B\n"
              << "# #wrong: wrong bytes of the first and last message of each test (both ranks)\n"
              << "# transports alternate per size and repeat\n"
              << TransportTableHeader(options.transports) << std::flush;
  }
  P2pSettings settings;
  settings.warmup_iters = options.warmup_iters;
  settings.iters = options.iters;
  settings.timeout_ms = static_cast<int64_t>(options.timeout_seconds * 1000);
  std::vector<TransportFigures> all_rows;
  uint64_t stamp = 0;
  const auto sizes = SizeSweep(options.min_bytes, options.max_bytes, options.factor);
  for (size_t si = 0; si < sizes.size(); ++si) {
    const int window = WindowFor(sizes[si], options.window);
    P2pBuffers buffers(sizes[si], window);
    std::vector<P2pSamples> samples(transports.size());
    for (int repeat = 0; repeat < options.repeats; ++repeat) {
      for (size_t k = 0; k < transports.size(); ++k) {
        const size_t t = (k + si + static_cast<size_t>(repeat)) % transports.size();
        MeasurePingPong(*transports[t].endpoint, settings, buffers, stamp, samples[t]);
        MeasureStream(*transports[t].endpoint, settings, buffers, stamp + 2, samples[t]);
        stamp += 4;
      }
    }
    std::vector<TransportFigures> row;
    for (size_t t = 0; t < transports.size(); ++t) {
      TransportFigures figures;
      figures.transport = transports[t].name;
      figures.bytes = sizes[si];
      figures.window = window;
      figures.latency_us = Median(samples[t].half_round_trip_us);
      figures.latency_mean_us = Mean(samples[t].half_round_trip_us);
      const auto stream_bytes =
          sizes[si] * static_cast<uint64_t>(window) * static_cast<uint64_t>(options.iters);
      figures.bandwidth_mbps = MebibytesPerSecond(stream_bytes, Median(samples[t].stream_us));
      figures.wrong =
          GatherWrong(job, "bench/transport_wrong/" + std::to_string(si) + "/" + std::to_string(t),
                      samples[t].wrong, options.timeout_seconds);
      row.push_back(figures);
    }
    if (leader) std::cout << TransportTableRow(row) << std::flush;
    all_rows.insert(all_rows.end(), row.begin(), row.end());
  }
  // Rank 1 keeps its endpoints until rank 0 has every message (its last sends may still be on
  // their way when they complete).
  const std::string done_key = "bench/transport_done";
  if (leader) {
    job.store->Set(done_key, ToBytes("1"));
  } else {
    job.store->Get(done_key,
                   std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000)));
    return 0;
  }
  if (!options.csv_path.empty()) {
    std::ofstream csv(options.csv_path);
    csv << TransportCsvHeader() << "\n";
    for (const auto& figures : all_rows) csv << TransportCsvRow(figures) << "\n";
    if (!csv) throw std::runtime_error("--csv " + options.csv_path + ": cannot write the file");
  }
  uint64_t total_wrong = 0;
  for (const auto& figures : all_rows) total_wrong += figures.wrong;
  if (total_wrong > 0) {
    std::cerr << "chorus-bench: " << total_wrong
              << " wrong bytes in total (see the #wrong columns)\n";
    return 1;
  }
  return 0;
}

}  // namespace

void CheckTransportNames(const std::vector<std::string>& names) {
  if (names.empty()) {
    throw UsageError("--transports needs at least one name, e.g. --transports tcp");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::find(names.begin(), names.begin() + static_cast<ptrdiff_t>(i), names[i]) !=
        names.begin() + static_cast<ptrdiff_t>(i)) {
      throw UsageError("--transports names '" + names[i] + "' twice");
    }
    Registry::Global().FindTransport(names[i], kTransportsFlag);
  }
}

int RunTransportBench(const BenchOptions& options) {
  return RunAsWorker(
      options.timeout_seconds, [&] { CheckTransportNames(options.transports); },
      [&](WorkerJob& job) { return Run(options, job); });
}

}  // namespace chorus::bench
