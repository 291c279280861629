#include "kernel_bench.h"

#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "enumerator_choice.h"
#include "expected_values.h"
#include "metrics.h"
#include "sizes.h"

namespace chorus::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Times `body` `iters` times after `warmup` untimed runs; returns the median in microseconds.
template <typename Body>
double MedianTime(int warmup, int iters, Body&& body) {
  std::vector<double> times;
  for (int it = 0; it < warmup + iters; ++it) {
    const auto start = Clock::now();
    body();
    if (it >= warmup) {
      times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  }
  return Median(times);
}

}  // namespace

std::string KernelTableHeader() {
  char line[256];
  std::snprintf(line, sizeof(line), "# %12s %12s %5s %5s %11s %10s %11s %10s %8s %7s\n", "size",
                "count", "type", "redop", "copy(us)", "copy GB/s", "reduce(us)", "reduce GB/s",
                "red/copy", "#wrong");
  return line;
}

std::string KernelTableRow(const KernelFigures& f, chorus_dtype dtype, chorus_reduce_op op) {
  char line[256];
  const size_t element = chorus_dtype_size(dtype);
  std::snprintf(line, sizeof(line),
                "  %12llu %12llu %5s %5s %11.2f %10.2f %11.2f %10.2f %8.2f %7llu\n",
                static_cast<unsigned long long>(f.bytes),
                static_cast<unsigned long long>(element ? f.bytes / element : 0), DtypeName(dtype),
                ReduceOpName(op), f.copy_us, f.copy_gbps, f.reduce_us, f.reduce_gbps,
                f.copy_gbps > 0 ? f.reduce_gbps / f.copy_gbps : 0.0,
                static_cast<unsigned long long>(f.wrong));
  return line;
}

int RunKernelBench(const BenchOptions& options) {
  try {
    if (options.reduce_op == CHORUS_REDUCE_MEAN) {
      throw std::invalid_argument(
          "-o mean: the reduce kernel takes sum, prod, min or max (MEAN divides afterwards)");
    }
    const auto enumerator = FindEnumerator(options.devices);
    if (enumerator->count() == 0) {
      std::cout << "chorus-bench --kernels: the '" << options.devices
                << "' enumerator sees no device on this machine; nothing to measure\n";
      return kNoDeviceExitCode;
    }
    const uint32_t device = 0;
    const Device on{enumerator, device};
    const chorus_dtype dtype = options.dtype;
    const size_t element = chorus_dtype_size(dtype);
    std::cout << "# chorus-bench --kernels: the '" << options.devices << "' enumerator's kernels "
              << "(plugin " << enumerator->library().name() << ") on device " << device << " ("
              << on.name() << "), dtype " << DtypeName(dtype) << ", reduce op "
              << ReduceOpName(options.reduce_op) << ", warm-up " << options.warmup_iters
              << ", iterations " << options.iters << ", median\n"
              << "# copy: device to device, GB/s = 2 x size / time (read and write); reduce: "
                 "dst = a op b, GB/s = 3 x size / time; red/copy: the reduce's share of the "
                 "copy's bandwidth\n"
              << KernelTableHeader() << std::flush;
    uint64_t total_wrong = 0;
    for (uint64_t bytes : SizeSweep(options.min_bytes, options.max_bytes, options.factor)) {
      const size_t count = bytes / element;
      const size_t used = count * element;
      KernelFigures f;
      f.bytes = used;
      DeviceBuffer a(on, used), b(on, used), dst(on, used);
      std::vector<unsigned char> host(used);
      FillInput(host.data(), count, dtype, options.reduce_op, 0, 0);
      a.CopyFromHost(host.data(), used);
      FillInput(host.data(), count, dtype, options.reduce_op, 1, 0);
      b.CopyFromHost(host.data(), used);
      f.copy_us = MedianTime(options.warmup_iters, options.iters,
                             [&] { enumerator->Copy(device, dst.data(), device, a.data(), used); });
      f.reduce_us = MedianTime(options.warmup_iters, options.iters, [&] {
        enumerator->Reduce(device, dst.data(), a.data(), b.data(), count, dtype, options.reduce_op);
      });
      // The last reduce's result, against the exact answer for two ranks.
      dst.CopyToHost(host.data(), used);
      f.wrong = CountWrongReduced(host.data(), count, dtype,
                                  ReducedPattern(2, options.reduce_op, dtype), 0);
      total_wrong += f.wrong;
      f.copy_gbps = AlgorithmBandwidthGbps(2 * used, f.copy_us);
      f.reduce_gbps = AlgorithmBandwidthGbps(3 * used, f.reduce_us);
      std::cout << KernelTableRow(f, dtype, options.reduce_op) << std::flush;
    }
    if (total_wrong > 0) {
      std::cerr << "chorus-bench: " << total_wrong << " wrong elements (see #wrong)\n";
      return 1;
    }
    return 0;
  } catch (const std::invalid_argument& e) {
    std::cerr << "chorus-bench: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "chorus-bench: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace chorus::bench
