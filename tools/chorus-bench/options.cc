#include "options.h"

#include <chorus/base/dtype.h>
#include <chorus/base/error.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <stdexcept>

#include "sizes.h"

namespace chorus::bench {

std::optional<int> ParseOptions(int argc, char** argv, BenchOptions* options) {
  CLI::App app{
      "chorus-bench: measures chorus collectives across worker processes (or cross-device ops "
      "in one process) and prints nccl-tests' figures: time, algbw, busbw and #wrong"};
  app.footer(
      "examples:\n"
      "  chorus-bench -n 2 --backends core_ring,gloo,ring_grpc -b 4K -e 64M -f 4\n"
      "  chorus-bench -n 2 --backends core_ring,ring@tcp,ring@ucx -b 4K -e 64M\n"
      "  chorus-bench -n 4 --hosts 2 --auto -b 4K -e 64M\n"
      "  chorus-bench -n 2 --transports tcp,ucx -b 8 -e 64M --window 16\n"
      "  chorus-bench --in-process --replicas 4 --stream-bandwidth\n"
      "  mpirun -n 2 chorus-bench --backends mpi,core_ring");
  std::string backends, ops = "all_reduce", min_bytes = "4K", max_bytes = "64M", dtype = "f32";
  std::string reduce_op = "sum", batch_bytes = "4K", stream_bytes = "128M";
  auto* backends_option = app.add_option(
      "--backends", backends,
      "comma list of collectives (core_ring, gloo, ring_grpc, mpi, shm, ..., an algorithm over a "
      "transport ALGORITHM@TRANSPORT such as ring@tcp or ring@ucx, or local+cross such as "
      "shm+gloo, or auto: the communicator AUTO makes for the job, as a trainer gets it with "
      "neither CHORUS_COMMUNICATION nor CHORUS_ALGORITHM set), or with --in-process of "
      "cross-device ops (default: CHORUS_COMMUNICATION's value when set, else core_ring; "
      "in-process: every cross-device ops found)");
  app.add_flag("--auto", options->auto_mode,
               "measure `auto` beside every collective that serves the job (or those --backends "
               "names), alternating, and print AUTO's regret per size: AUTO's time / the "
               "fastest's (also as CSV beside --csv: FILE.regret.csv)");
  std::string transports;
  auto* transports_option = app.add_option(
      "--transports", transports,
      "comma list of transports (plugin.h interface 5: tcp, ucx, ofi, any plugin's) to measure "
      "point to point between 2 workers instead of collectives: ping-pong latency (half round "
      "trip, us) and streaming bandwidth (MB/s, MB = 2^20 B) per size; -b defaults to 8 here");
  auto* window_option =
      app.add_option("--window", options->window,
                     "--transports: sends in flight per window of the bandwidth test, one ack "
                     "per window (fewer for large sizes: at most 256M in flight)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1024));
  auto* ops_option =
      app.add_option("--ops", ops,
                     "comma list: all_reduce, all_gather, broadcast, reduce_scatter; in-process "
                     "also batch_reduce")
          ->capture_default_str();
  auto* min_bytes_option =
      app.add_option("-b,--minbytes", min_bytes, "smallest size (suffix K, M, G)")
          ->capture_default_str();
  app.add_option("-e,--maxbytes", max_bytes, "largest size")->capture_default_str();
  std::string factor = "4";
  app.add_option("-f,--stepfactor", factor, "multiplication factor between sizes")
      ->capture_default_str();
  auto* dtype_option =
      app.add_option("-d,--datatype", dtype, "f32, f64, f16, bf16, i32, i64, u8, i8")
          ->capture_default_str();
  auto* reduce_op_option =
      app.add_option("-o,--op", reduce_op, "reduce op: sum, prod, min, max, mean")
          ->capture_default_str();
  auto* root_option = app.add_option("-r,--root", options->root, "broadcast's root rank")
                          ->capture_default_str()
                          ->check(CLI::NonNegativeNumber);
  app.add_option("-w,--warmup_iters", options->warmup_iters, "untimed iterations per row")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-i,--iters", options->iters, "timed iterations per row (median reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-R,--repeats", options->repeats,
                 "passes over the backends per size, in rotated order; the median is over "
                 "every timed iteration of every pass")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--workers", options->workers,
                 "start this many worker processes on 127.0.0.1 (without it: run as one worker "
                 "of a job described by TF_CONFIG or mpirun's variables)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--hosts", options->hosts,
                 "with -n: the workers play this many hosts, numbered host by host (each worker's "
                 "CHORUS_HOST_ID), to measure a hierarchical collective such as shm+gloo on one "
                 "machine")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--in-process", options->in_process,
               "measure cross-device ops across --replicas devices of this process (virtual cpu "
               "devices, or those of --devices)");
  app.add_flag("--kernels", options->kernels,
               "measure the copy and reduce kernels of the --devices enumerator on its device 0 "
               "(bytes moved: 2 x size for the copy, 3 x size for dst = a op b)");
  app.add_option("--devices", options->devices,
                 "the device enumerator --kernels and --in-process run on: cpu, or a plugin's "
                 "platform (cuda)")
      ->capture_default_str();
  app.add_option("--replicas", options->replicas, "devices for --in-process")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--batch-count", options->batch_count, "batch_reduce: tensors per batch")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app.add_option("--batch-bytes", batch_bytes, "batch_reduce: bytes per tensor")
      ->capture_default_str();
  std::string bytes_per_pack;
  app.add_option("--bytes-per-pack", bytes_per_pack,
                 "batch_reduce: pack tensors into packs of at most this many bytes before the "
                 "batch reduce, as the core does (0: one pack; default: no packing)");
  app.add_option("--num-packs", options->num_packs,
                 "num_packs option handed to the cross-device ops (hierarchical_copy)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--stream-bandwidth", options->stream_bandwidth,
               "measure the host's streaming bandwidth (a[i] += b[i]) first");
  app.add_option("--stream-bytes", stream_bytes, "size of each array for --stream-bandwidth")
      ->capture_default_str();
  app.add_option("--csv", options->csv_path, "also write the measurements as CSV to this file");
  app.add_option("--plot", options->plot_path, "also write busbw against size as SVG");
  app.add_flag("--suggest-rules", options->suggest_rules,
               "at the end, print the CHORUS_ALGORITHM rules that run every size on the backend "
               "that was fastest there (multi-worker runs)");
  app.add_option("--tuning-file", options->tuning_file,
                 "with --suggest-rules' rules, write a tuning file for CHORUS_TUNING_FILE: a "
                 "section for this job's shape (workers, --hosts) holding them (implies "
                 "--suggest-rules)");
  app.add_option("--timeout", options->timeout_seconds,
                 "seconds each collective may take before it fails")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--job-timeout", options->job_timeout_seconds,
                 "with -n: seconds the whole job may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    options->backends = SplitCommaList(backends);
    options->transports = SplitCommaList(transports);
    if (transports_option->count() > 0) {
      if (options->transports.empty()) {
        throw std::invalid_argument("--transports needs at least one name, e.g. --transports tcp");
      }
      if (min_bytes_option->count() == 0) min_bytes = "8";
      // What only the collective modes measure.
      const std::vector<std::pair<bool, const char*>> excluded = {
          {backends_option->count() > 0, "--backends (collectives)"},
          {ops_option->count() > 0, "--ops"},
          {dtype_option->count() > 0, "-d/--datatype"},
          {reduce_op_option->count() > 0, "-o/--op"},
          {root_option->count() > 0, "-r/--root"},
          {options->in_process, "--in-process"},
          {options->kernels, "--kernels"},
          {options->hosts > 1, "--hosts"},
          {!options->plot_path.empty(), "--plot"},
          {options->suggest_rules || !options->tuning_file.empty(),
           "--suggest-rules/--tuning-file"},
          {options->stream_bandwidth, "--stream-bandwidth"},
          {options->auto_mode, "--auto"}};
      for (const auto& [given, flag] : excluded) {
        if (given) {
          throw std::invalid_argument(
              std::string(flag) +
              " is not for --transports, which sends bytes point to point between 2 workers; "
              "run the transports and the collectives as two commands");
        }
      }
      if (options->workers != 0 && options->workers != 2) {
        throw std::invalid_argument("--transports measures between 2 workers: -n 2, not -n " +
                                    std::to_string(options->workers));
      }
    } else if (window_option->count() > 0) {
      throw std::invalid_argument("--window is for --transports (the bandwidth test's window)");
    }
    options->ops = ParseCollectiveList(ops);
    options->min_bytes = ParseSize(min_bytes);
    options->max_bytes = ParseSize(max_bytes);
    options->factor = ParseSize(factor);
    options->batch_bytes = ParseSize(batch_bytes);
    options->stream_bytes = ParseSize(stream_bytes);
    if (!bytes_per_pack.empty()) {
      const uint64_t pack = ParseSize(bytes_per_pack);
      if (pack > static_cast<uint64_t>(INT64_MAX))
        throw std::invalid_argument("--bytes-per-pack too large");
      options->bytes_per_pack = static_cast<int64_t>(pack);
    }
    SizeSweep(options->min_bytes, options->max_bytes, options->factor);  // checks the three
    options->dtype = ParseDtype(dtype);
    options->reduce_op = ParseReduceOp(reduce_op);
    for (CollectiveKind op : options->ops) {
      if (op == CollectiveKind::kBatchReduce && !options->in_process) {
        throw std::invalid_argument("batch_reduce is an --in-process operation (cross-device ops)");
      }
    }
    if (options->hosts > 1 && (options->workers == 0 || options->workers % options->hosts != 0)) {
      throw std::invalid_argument("--hosts " + std::to_string(options->hosts) +
                                  " needs -n with a multiple of it (as many workers per host)");
    }
    if (!options->tuning_file.empty()) options->suggest_rules = true;
    if (options->suggest_rules && options->in_process) {
      throw std::invalid_argument(
          "--suggest-rules is for collectives across workers (CHORUS_ALGORITHM routes those); "
          "cross-device ops are chosen with CHORUS_CROSS_DEVICE_OPS");
    }
    if (options->kernels && (options->in_process || options->workers > 0)) {
      throw std::invalid_argument(
          "--kernels runs in this process alone: without --in-process and -n");
    }
    if (options->kernels && (!options->csv_path.empty() || !options->plot_path.empty())) {
      throw std::invalid_argument(
          "--kernels prints its table only; --csv and --plot are for "
          "collectives and cross-device ops");
    }
    if (options->devices != "cpu" && !options->kernels && !options->in_process) {
      throw std::invalid_argument("--devices is for --kernels and --in-process");
    }
    if (options->auto_mode && (options->in_process || options->kernels)) {
      throw std::invalid_argument(
          "--auto is for collectives across workers (-n, or a job's workers); cross-device ops "
          "are compared with --in-process --backends");
    }
    if (options->in_process && options->workers > 0) {
      throw std::invalid_argument("--in-process and -n exclude each other");
    }
  } catch (const std::exception& e) {
    std::cerr << "chorus-bench: " << e.what() << "\n";
    return 2;
  }
  options->argv.assign(argv, argv + argc);
  return std::nullopt;
}

}  // namespace chorus::bench
