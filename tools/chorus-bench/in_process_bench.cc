#include "in_process_bench.h"

#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <stdexcept>

#include "collective_run.h"
#include "enumerator_choice.h"
#include "expected_values.h"
#include "metrics.h"
#include "results_writer.h"
#include "sizes.h"
#include "stream_bandwidth.h"

namespace chorus::bench {

namespace {

using Clock = std::chrono::steady_clock;

double Elapsed(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// A replica's buffers on its device. The host RunBuffers are where inputs are written and
// results checked; `input` is copied over once per size and `work` before every iteration (both
// untimed), so the same code measures cpu devices and a plugin's (cuda).
struct OnDevice {
  DeviceBuffer input, work;
};

void RunCrossDeviceOp(CrossDeviceOps& ops, const RunSpec& spec, std::vector<OnDevice>& replicas) {
  const size_t n = replicas.size();
  auto input = [&](size_t d) { return replicas[d].input.buffer(); };
  auto work = [&](size_t d) { return replicas[d].work.buffer(); };
  if (spec.kind == CollectiveKind::kAllReduce) {
    ReduceSpec reduce;
    reduce.dtype = spec.dtype;
    reduce.count = spec.count;
    for (size_t d = 0; d < n; ++d) {
      reduce.inputs.push_back(spec.in_place ? work(d) : input(d));
      reduce.outputs.push_back(work(d));
    }
    ops.Reduce(spec.reduce_op, reduce);
  } else if (spec.kind == CollectiveKind::kBroadcast) {
    const auto root = static_cast<size_t>(spec.root);
    std::vector<chorus_buffer> outputs;
    for (size_t d = 0; d < n; ++d) {
      if (spec.in_place && d == root) continue;  // in place, the root's buffer is the source
      outputs.push_back(work(d));
    }
    if (outputs.empty()) return;  // one replica, in place: nothing to do
    ops.Broadcast(spec.dtype, spec.count, spec.in_place ? work(root) : input(root), outputs);
  } else {  // all_gather, out of place
    std::vector<chorus_buffer> inputs, outputs;
    for (size_t d = 0; d < n; ++d) {
      inputs.push_back(input(d));
      outputs.push_back(work(d));
    }
    ops.AllGather(spec.dtype, inputs, std::vector<size_t>(n, spec.count), outputs);
  }
}

// Times of the timed iterations and the elements wrong after the last one, over every replica;
// `first_call_us`, when given, gets the time of the first (untimed) iteration.
std::pair<std::vector<double>, uint64_t> MeasureOp(const BenchOptions& options, CrossDeviceOps& ops,
                                                   RunSpec spec, std::vector<RunBuffers>& replicas,
                                                   std::vector<OnDevice>& on_device,
                                                   double* first_call_us = nullptr) {
  std::vector<double> times;
  uint64_t wrong = 0;
  const int total = options.warmup_iters + options.iters;
  for (int it = 0; it < total; ++it) {
    const bool checked = it == total - 1;
    for (size_t d = 0; d < replicas.size(); ++d) {
      spec.rank = static_cast<int>(d);
      PrepareIteration(spec, replicas[d], checked);
      if (WorkBytes(spec) > 0)
        on_device[d].work.CopyFromHost(replicas[d].work.data(), WorkBytes(spec));
    }
    const auto start = Clock::now();
    RunCrossDeviceOp(ops, spec, on_device);
    if (it >= options.warmup_iters) times.push_back(Elapsed(start));
    if (it == 0 && first_call_us != nullptr) *first_call_us = Elapsed(start);
    if (!checked) continue;
    for (size_t d = 0; d < replicas.size(); ++d) {
      spec.rank = static_cast<int>(d);
      if (WorkBytes(spec) > 0)
        on_device[d].work.CopyToHost(replicas[d].work.data(), WorkBytes(spec));
      wrong += CountWrongElements(spec, replicas[d]);
    }
  }
  return {times, wrong};
}

Measurement MakeMeasurement(const std::string& backend, const RunSpec& spec, uint64_t bytes,
                            const std::vector<double>& times, uint64_t wrong) {
  Measurement m;
  m.backend = backend;
  m.op = spec.kind;
  m.bytes = bytes;
  m.count = spec.count;
  m.dtype = DtypeName(spec.dtype);
  const bool reduces =
      spec.kind == CollectiveKind::kAllReduce || spec.kind == CollectiveKind::kBatchReduce;
  m.reduce_op = reduces ? ReduceOpName(spec.reduce_op) : "";
  m.root = spec.kind == CollectiveKind::kBroadcast ? spec.root : -1;
  m.in_place = spec.in_place;
  m.time_us = Median(times);
  m.algbw_gbps = AlgorithmBandwidthGbps(bytes, m.time_us);
  m.busbw_gbps = m.algbw_gbps * BusBandwidthFactor(spec.kind, spec.ranks);
  m.wrong = wrong;
  return m;
}

// batch_count tensors of batch_bytes per replica, reduced in place in one batch_reduce call.
// With --bytes-per-pack, consecutive tensors are first copied into packs of at most that many
// bytes (0: one pack), the packs reduced, and the results copied back, as the core's
// PackedBatchReduce does; the copies are timed with the reduce.
// The cpu devices' memory is host memory: here a replica's tensors are plain host vectors.
chorus_buffer On(uint32_t device, unsigned char* data) { return chorus_buffer{device, data}; }

Measurement MeasureBatch(const BenchOptions& options, CrossDeviceOps& ops, int replicas) {
  const size_t element = chorus_dtype_size(options.dtype);
  const size_t tensor_count = static_cast<size_t>(options.batch_bytes / element);
  const size_t tensor_bytes = tensor_count * element;
  const size_t tensors = static_cast<size_t>(options.batch_count);
  const size_t n = static_cast<size_t>(replicas);
  // The tensors of a replica lie one after the other; packs are ranges of them.
  std::vector<std::pair<size_t, size_t>> packs;  // first tensor, tensor count
  if (options.bytes_per_pack < 0) {
    for (size_t t = 0; t < tensors; ++t) packs.push_back({t, 1});
  } else {
    const auto limit = static_cast<size_t>(options.bytes_per_pack);
    for (size_t t = 0; t < tensors; ++t) {
      if (!packs.empty() && (limit == 0 || (packs.back().second + 1) * tensor_bytes <= limit)) {
        ++packs.back().second;
      } else {
        packs.push_back({t, 1});
      }
    }
  }
  const bool packing = options.bytes_per_pack >= 0;
  RunSpec spec{CollectiveKind::kAllReduce, options.dtype, options.reduce_op, 0, 0, replicas,
               tensors * tensor_count,     true};
  std::vector<RunBuffers> buffers(n);
  std::vector<std::vector<unsigned char>> pack_buffers(n);
  for (size_t d = 0; d < n; ++d) {
    spec.rank = static_cast<int>(d);
    FillInputs(spec, buffers[d]);
    if (packing) pack_buffers[d].resize(std::max<size_t>(tensors * tensor_bytes, 1));
  }
  std::vector<ReduceSpec> specs(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) {
    specs[p].dtype = options.dtype;
    specs[p].count = packs[p].second * tensor_count;
    for (size_t d = 0; d < n; ++d) {
      auto& memory = packing ? pack_buffers[d] : buffers[d].work;
      specs[p].inputs.push_back(
          On(static_cast<uint32_t>(d), memory.data() + packs[p].first * tensor_bytes));
    }
    specs[p].outputs = specs[p].inputs;
  }
  std::vector<double> times;
  uint64_t wrong = 0;
  const int total = options.warmup_iters + options.iters;
  for (int it = 0; it < total; ++it) {
    for (size_t d = 0; d < n; ++d) PrepareIteration(spec, buffers[d], it == total - 1);
    const auto start = Clock::now();
    if (packing) {  // concatenate each pack, reduce, split back
      for (size_t d = 0; d < n; ++d) {
        std::memcpy(pack_buffers[d].data(), buffers[d].work.data(), tensors * tensor_bytes);
      }
      ops.BatchReduce(options.reduce_op, specs);
      for (size_t d = 0; d < n; ++d) {
        std::memcpy(buffers[d].work.data(), pack_buffers[d].data(), tensors * tensor_bytes);
      }
    } else {
      ops.BatchReduce(options.reduce_op, specs);
    }
    if (it >= options.warmup_iters) times.push_back(Elapsed(start));
  }
  for (size_t d = 0; d < n; ++d) {
    spec.rank = static_cast<int>(d);
    wrong += CountWrongElements(spec, buffers[d]);
  }
  spec.kind = CollectiveKind::kBatchReduce;
  return MakeMeasurement(ops.name(), spec, tensors * tensor_bytes, times, wrong);
}

std::string Join(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

int Run(const BenchOptions& options) {
  const bool cpu = options.devices == "cpu";
  if (cpu) setenv("CHORUS_CPU_DEVICES", std::to_string(options.replicas).c_str(), 1);
  auto& registry = Registry::Global();
  const auto enumerator = cpu ? registry.CpuDevices() : FindEnumerator(options.devices);
  if (!cpu && enumerator->count() == 0) {
    std::cout << "chorus-bench --in-process: the '" << options.devices
              << "' enumerator sees no device on this machine; nothing to measure\n";
    return kNoDeviceExitCode;
  }
  if (cpu ? enumerator->count() != static_cast<uint32_t>(options.replicas)
          : enumerator->count() < static_cast<uint32_t>(options.replicas)) {
    throw std::invalid_argument("--replicas " + std::to_string(options.replicas) + " but the '" +
                                options.devices + "' enumerator has " +
                                std::to_string(enumerator->count()) + " devices");
  }
  for (CollectiveKind kind : options.ops) {
    if (kind == CollectiveKind::kBatchReduce && !cpu) {
      throw std::invalid_argument("batch_reduce is measured on cpu devices only (--devices cpu)");
    }
  }
  std::vector<Device> devices;
  for (uint32_t d = 0; d < static_cast<uint32_t>(options.replicas); ++d) {
    devices.push_back(Device{enumerator, d});
  }
  const auto available = registry.CrossDeviceOpsNames();
  std::vector<std::string> backends = options.backends.empty() ? available : options.backends;
  for (const auto& name : backends) {
    if (std::find(available.begin(), available.end(), name) == available.end()) {
      throw std::invalid_argument("unknown cross-device ops '" + name +
                                  "'; available: " + Join(available));
    }
  }
  if (options.root >= options.replicas) {
    throw std::invalid_argument("--root " + std::to_string(options.root) + " is not a replica of " +
                                std::to_string(options.replicas));
  }
  for (CollectiveKind kind : options.ops) {
    if (kind == CollectiveKind::kReduceScatter) {
      throw std::invalid_argument(
          "reduce_scatter is not a cross-device op; --in-process runs all_reduce, broadcast, "
          "all_gather and batch_reduce");
    }
  }
  Options create_options;
  if (options.num_packs)
    create_options.push_back({"num_packs", std::to_string(*options.num_packs)});
  std::vector<std::unique_ptr<CrossDeviceOps>> all_ops;
  std::vector<std::string> skipped;  // found, but not runnable on these devices
  for (auto it = backends.begin(); it != backends.end();) {
    try {
      all_ops.push_back(CrossDeviceOps::Create(registry, *it, devices, create_options));
    } catch (const Error& e) {
      // Named ones must work; of those found by default, skip what cannot run here, saying why.
      const bool cannot_run_here =
          e.status() == CHORUS_UNSUPPORTED || e.status() == CHORUS_UNAVAILABLE;
      if (!options.backends.empty() || !cannot_run_here) throw;
      skipped.push_back(*it + " (" + e.what() + ")");
      it = backends.erase(it);
      continue;
    }
    all_ops.back()->set_timeout_seconds(options.timeout_seconds);
    ++it;
  }
  if (backends.empty()) {
    throw std::runtime_error("no cross-device ops runs on " + options.devices +
                             " devices here: " + Join(skipped));
  }

  ResultsWriter writer(options.csv_path, options.plot_path,
                       "chorus-bench --in-process: busbw, " + std::to_string(options.replicas) +
                           " replicas, " + DtypeName(options.dtype));
  writer.Comment("chorus-bench --in-process: " + std::to_string(options.replicas) +
                 (cpu ? " virtual cpu devices"
                      : " '" + options.devices + "' devices (" + devices[0].name() + ", ...)") +
                 ", cross-device ops " + Join(backends) +
                 (options.num_packs ? ", num_packs " + std::to_string(*options.num_packs) : ""));
  for (const auto& line : skipped) writer.Comment("skipped " + line);
  writer.Comment("dtype " + std::string(DtypeName(options.dtype)) + ", reduce op " +
                 ReduceOpName(options.reduce_op) + ", warm-up " +
                 std::to_string(options.warmup_iters) + ", iterations " +
                 std::to_string(options.iters) + " x " + std::to_string(options.repeats) +
                 " repeats; time: median over iterations of one call");
  writer.Comment(
      "algbw = size / time; busbw = algbw x 2(n-1)/n all_reduce and batch_reduce, "
      "(n-1)/n all_gather (size: all n blocks), 1 broadcast; n = replicas");
  if (options.stream_bandwidth) {
    const auto stream = MeasureStreamBandwidth(options.stream_bytes, 10);
    char line[256];
    std::snprintf(line, sizeof(line),
                  "host stream bandwidth: %.2f GB/s (a[i] += b[i], f32, two arrays of %s, one "
                  "thread; bytes moved = 3 x %s per pass: read a, read b, write a; median of 10 "
                  "passes, %.0f us each)",
                  stream.gbps, FormatSize(stream.array_bytes).c_str(),
                  FormatSize(stream.array_bytes).c_str(), stream.time_us);
    writer.Comment(line);
  }
  const size_t element = chorus_dtype_size(options.dtype);
  const auto sizes = SizeSweep(options.min_bytes, options.max_bytes, options.factor);
  for (CollectiveKind kind : options.ops) {
    if (kind == CollectiveKind::kBatchReduce) {
      const std::string packing =
          options.bytes_per_pack < 0 ? "no packing: every tensor its own reduce in the batch"
          : options.bytes_per_pack == 0
              ? "bytes_per_pack 0: one pack"
              : "bytes_per_pack " + FormatSize(static_cast<uint64_t>(options.bytes_per_pack));
      writer.BeginOperation("batch_reduce of " + std::to_string(options.batch_count) +
                            " tensors x " + FormatSize(options.batch_bytes) + " (" + packing +
                            "), in place; compare with all_reduce of the same total size");
      for (auto& ops : all_ops) {
        std::vector<Measurement> runs;
        for (int repeat = 0; repeat < options.repeats; ++repeat) {
          runs.push_back(MeasureBatch(options, *ops, options.replicas));
        }
        Measurement m = runs.front();
        for (const auto& r : runs) m.wrong = std::max(m.wrong, r.wrong);
        std::vector<double> medians;
        for (const auto& r : runs) medians.push_back(r.time_us);
        m.time_us = Median(medians);
        m.algbw_gbps = AlgorithmBandwidthGbps(m.bytes, m.time_us);
        m.busbw_gbps = m.algbw_gbps * BusBandwidthFactor(kind, options.replicas);
        writer.Add(nullptr, &m);
      }
      continue;
    }
    writer.BeginOperation(std::string(CollectiveName(kind)) +
                          (kind == CollectiveKind::kAllGather ? " (out of place only)" : ""));
    std::vector<bool> placements = {false, true};
    if (kind == CollectiveKind::kAllGather) placements = {false};
    std::vector<RunBuffers> replicas(static_cast<size_t>(options.replicas));
    // Per backend, the first call at each size (out of place): for ops that compile a program
    // per shape (the tpu plugin's), the compile's cost beside the cached calls of the table.
    std::vector<std::string> first_calls(all_ops.size());
    for (size_t si = 0; si < sizes.size(); ++si) {
      const RowLayout layout = LayoutFor(kind, sizes[si], element, options.replicas);
      RunSpec spec{kind, options.dtype,    options.reduce_op, options.root,
                   0,    options.replicas, layout.count,      false};
      std::vector<OnDevice> on_device;
      for (size_t d = 0; d < replicas.size(); ++d) {
        spec.rank = static_cast<int>(d);
        FillInputs(spec, replicas[d]);
        // At least one byte, so that no pointer is null at size 0 (as FillInputs).
        on_device.push_back({DeviceBuffer(devices[d], std::max<size_t>(InputBytes(spec), 1)),
                             DeviceBuffer(devices[d], std::max<size_t>(WorkBytes(spec), 1))});
        if (InputBytes(spec) > 0) {
          on_device[d].input.CopyFromHost(replicas[d].input.data(), InputBytes(spec));
        }
      }
      std::map<std::pair<size_t, bool>, std::pair<std::vector<double>, uint64_t>> samples;
      for (int repeat = 0; repeat < options.repeats; ++repeat) {
        for (size_t k = 0; k < all_ops.size(); ++k) {
          const size_t b = (k + si + static_cast<size_t>(repeat)) % all_ops.size();
          for (bool in_place : placements) {
            spec.in_place = in_place;
            double first_call_us = 0;
            const bool first = repeat == 0 && !in_place;
            auto [times, wrong] = MeasureOp(options, *all_ops[b], spec, replicas, on_device,
                                            first ? &first_call_us : nullptr);
            if (first) {
              char text[64];
              std::snprintf(text, sizeof text, "%s%s %.0f", first_calls[b].empty() ? "" : ", ",
                            FormatSize(layout.bytes).c_str(), first_call_us);
              first_calls[b] += text;
            }
            auto& into = samples[{b, in_place}];
            into.first.insert(into.first.end(), times.begin(), times.end());
            into.second = std::max(into.second, wrong);
          }
        }
      }
      for (size_t b = 0; b < all_ops.size(); ++b) {
        std::map<bool, Measurement> row;
        for (bool in_place : placements) {
          spec.in_place = in_place;
          const auto& s = samples[{b, in_place}];
          row[in_place] = MakeMeasurement(backends[b], spec, layout.bytes, s.first, s.second);
        }
        writer.Add(&row[false], row.count(true) ? &row[true] : nullptr);
      }
      writer.Progress(std::string(CollectiveName(kind)) + " size " + std::to_string(si + 1) + "/" +
                      std::to_string(sizes.size()));
    }
    for (size_t b = 0; b < all_ops.size(); ++b) {
      writer.Comment("first call, out of place (us): " + backends[b] + ": " + first_calls[b]);
    }
  }
  writer.Finish();
  if (writer.total_wrong() > 0) {
    std::cerr << "chorus-bench: " << writer.total_wrong()
              << " wrong elements in total (see the #wrong columns)\n";
    return 1;
  }
  return 0;
}

}  // namespace

int RunInProcessBench(const BenchOptions& options) {
  try {
    return Run(options);
  } catch (const std::invalid_argument& e) {
    std::cerr << "chorus-bench: " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << "chorus-bench: " << StatusName(e.status()) << ": " << e.what() << "\n";
    return e.status() == CHORUS_INVALID_ARGUMENT || e.status() == CHORUS_UNSUPPORTED ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "chorus-bench: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace chorus::bench
