// chorus-ps-bench: what a parameter-server job costs. Every task of the job runs it (under
// chorus-launch --ps P --workers W -- chorus-ps-bench); the chief measures:
//   1. the coordinator: empty functions scheduled and completed per second over every worker;
//   2. push-pull of a sharded variable (assign, then read_into a tensor the loop reuses) against
//      raw gRPC streaming of the same bytes between the same two processes (a client stream in,
//      a server stream out, 1 MiB messages): the bandwidth any gRPC program gets, with nothing
//      of chorus's on the way.
// Figures are medians over --rounds.
#include <chorus/base/error.h>
#include <chorus/parameter_server/cluster_coordinator.h>
#include <chorus/parameter_server/functions.h>
#include <chorus/runtime/registry.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "raw_stream.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int RunChief(int functions, int64_t bytes, int rounds) {
  chorus::Device host{chorus::Registry::Global().CpuDevices(), 0};
  // 1. The coordinator, with one function in flight per worker (TensorFlow's way) and with two.
  for (int per_worker : {1, 2}) {
    chorus::ParameterServerStrategy strategy;
    chorus::CoordinatorOptions options;
    options.functions_per_worker = per_worker;
    chorus::ClusterCoordinator coordinator(strategy, options);
    coordinator.keep_servers_running();
    for (int i = 0; i < 200; ++i) coordinator.schedule("empty");  // warm-up: connections
    coordinator.join();
    std::vector<double> rates;
    for (int r = 0; r < rounds; ++r) {
      const auto start = Clock::now();
      for (int i = 0; i < functions; ++i) coordinator.schedule("empty");
      coordinator.join();
      rates.push_back(functions / Seconds(start));
    }
    std::printf(
        "coordinator: %d workers, %d in flight per worker, %d empty functions a round: "
        "%.0f functions/s scheduled and completed (median of %d rounds; min %.0f, max "
        "%.0f)\n",
        strategy.num_workers(), per_worker, functions, Median(rates), rounds,
        *std::min_element(rates.begin(), rates.end()),
        *std::max_element(rates.begin(), rates.end()));
  }
  // 2. Push-pull against raw gRPC streaming, the same bytes between the chief and ps 0 (and
  //    the variable split over every ps).
  const double mib = static_cast<double>(bytes) / (1 << 20);
  const int64_t rows = bytes / 4 / 1024;
  chorus::Tensor value(host, CHORUS_F32, {rows, 1024});
  chorus::Tensor result(host, CHORUS_F32, {rows, 1024});
  for (int shards_over : {1, 0}) {  // 1: one shard on ps 0; 0: one shard on every ps
    auto resolver = chorus::ResolveClusterFromEnvironment();
    const int num_ps = static_cast<int>(resolver->cluster_spec().at("ps").size());
    if (shards_over == 0 && num_ps == 1) continue;
    chorus::ParameterServerStrategy strategy(
        std::move(resolver), std::make_shared<chorus::partitioners::FixedShardsPartitioner>(
                                 shards_over == 1 ? 1 : num_ps));
    chorus::ShardedVariable variable = strategy.CreateVariable(
        chorus::VariableSpec{"bench_" + std::to_string(shards_over)}, value);
    std::vector<double> raw, raw_in, raw_out, push_pull, push, pull, fresh_read;
    for (int r = 0; r < rounds; ++r) {
      const auto [in, out] = chorus::ps_internal::RawStreamSeconds(strategy, 0, bytes, 1 << 20);
      raw.push_back(2 * mib / (in + out));
      raw_in.push_back(mib / in);
      raw_out.push_back(mib / out);
      auto start = Clock::now();
      variable.assign(value);
      const double assign = Seconds(start);
      start = Clock::now();
      variable.read_into(result);  // into a tensor the loop reuses, as a training loop would
      const double reading = Seconds(start);
      start = Clock::now();
      const chorus::Tensor fresh = variable.read();  // the same into a new tensor
      fresh_read.push_back(mib / Seconds(start));
      push_pull.push_back(2 * mib / (assign + reading));
      push.push_back(mib / assign);
      pull.push_back(mib / reading);
    }
    const int shards = static_cast<int>(variable.shards().size());
    std::printf(
        "push-pull of a %.0f MiB variable in %d shard(s) over %d ps: %.0f MiB/s (assign "
        "%.0f, read_into %.0f; read() into a new tensor %.0f); raw gRPC streaming chief <-> "
        "ps 0, same bytes, 1 MiB "
        "messages: %.0f MiB/s (in %.0f, out %.0f); ratio %.2f (medians of %d rounds)\n",
        mib, shards, shards == 1 ? 1 : num_ps, Median(push_pull), Median(push), Median(pull),
        Median(fresh_read), Median(raw), Median(raw_in), Median(raw_out),
        Median(push_pull) / Median(raw), rounds);
    chorus::ClusterCoordinator coordinator(strategy);
    if (shards_over == 1 && num_ps > 1) coordinator.keep_servers_running();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "chorus-ps-bench: the coordinator's functions per second and push-pull against raw "
      "gRPC streaming; run every task of it under chorus-launch --ps P --workers W"};
  int functions = 2000;
  int64_t bytes = 64 << 20;
  int rounds = 5;
  app.add_option("--functions", functions, "empty functions a round")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--bytes", bytes, "variable size for push-pull (a multiple of 4 KiB)")
      ->check(CLI::Range(int64_t{4096}, int64_t{1} << 32));
  app.add_option("--rounds", rounds, "rounds of each measurement")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  try {
    chorus::RegisterFunction("empty",
                             [](chorus::FunctionContext&, const std::vector<chorus::Tensor>&) {
                               return std::vector<chorus::Tensor>{};
                             });
    if (chorus::ServeIfServerTask()) return 0;
    return RunChief(functions, bytes, rounds);
  } catch (const std::exception& e) {
    std::cerr << "chorus-ps-bench: " << e.what() << "\n";
    return 1;
  }
}
