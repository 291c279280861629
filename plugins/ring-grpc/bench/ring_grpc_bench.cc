// All-reduce throughput of the ring-grpc plugin: `ranks` threads of one process, each with its
// communicator over the core's in-process store (the conformance kit's rank threads), all-reduce
// `mib` MiB of f32 (SUM) `iters` times after two warm-up rounds. Prints the mean time and, as
// nccl-tests does, algbw = bytes / time and busbw = algbw * 2 (n - 1) / n.
//
//   chorus_ring_grpc_bench [ranks=2] [mib=64] [iters=5] [segment_bytes=1048576]
#include <chorus/conformance/rank_threads.h>
#include <chorus/runtime/plugin_library.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Settings {
  int ranks = 2;
  size_t mib = 64;
  int iters = 5;
  std::string segment_bytes = "1048576";
};

int Run(const Settings& settings) {
  std::string reason;
  const auto library = chorus::PluginLibrary::Load(CHORUS_RING_GRPC_PLUGIN_FILE, &reason);
  if (library == nullptr || library->collective() == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", CHORUS_RING_GRPC_PLUGIN_FILE, reason.c_str());
    return 1;
  }
  const chorus_collective_api& api = *library->collective();
  const size_t count = settings.mib * (size_t{1} << 20) / sizeof(float);
  chorus::conformance::CommunicatorGroup group(
      library, api, settings.ranks,
      chorus::conformance::CommunicatorSettings(60000,
                                                {{"segment_bytes", settings.segment_bytes}}));
  if (const std::string error = group.CreateError(); !error.empty()) {
    std::fprintf(stderr, "%s", error.c_str());
    return 1;
  }
  std::vector<double> seconds(static_cast<size_t>(settings.ranks), 0);
  const auto failures = chorus::conformance::RunRankThreads(settings.ranks, [&](int rank) {
    chorus_communicator* comm = group.comm(rank);
    std::vector<float> data(count, 1.0f);
    chorus_all_reduce_args args{};
    args.struct_size = sizeof(args);
    args.send = data.data();
    args.recv = data.data();
    args.count = count;
    args.dtype = CHORUS_F32;
    args.op = CHORUS_REDUCE_SUM;
    chorus_request* request = nullptr;
    for (int i = 0; i < 2 + settings.iters; ++i) {
      // Start the timed rounds together.
      if (i == 2 && api.barrier(comm, &request) != CHORUS_OK) {
        return "barrier: " + library->LastError();
      }
      const auto start = std::chrono::steady_clock::now();
      if (api.all_reduce(comm, &args, &request) != CHORUS_OK) {
        return "all_reduce: " + library->LastError();
      }
      if (i >= 2) {
        seconds[static_cast<size_t>(rank)] +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    }
    return std::string();
  });
  if (!failures.ok()) {
    std::fprintf(stderr, "%s", failures.Joined().c_str());
    return 1;
  }
  double slowest = 0;
  for (double s : seconds) slowest = std::max(slowest, s);
  const double time = slowest / settings.iters;
  const double bytes = static_cast<double>(count * sizeof(float));
  const double algbw = bytes / time / 1e9;
  const double busbw = algbw * 2.0 * (settings.ranks - 1) / settings.ranks;
  std::printf("ring_grpc all_reduce f32 SUM: ranks %d, %zu MiB, segment_bytes %s, %d iterations\n",
              settings.ranks, settings.mib, settings.segment_bytes.c_str(), settings.iters);
  std::printf("  time %.2f ms   algbw %.3f GB/s   busbw %.3f GB/s\n", time * 1e3, algbw, busbw);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (argc > 1) settings.ranks = std::atoi(argv[1]);
  if (argc > 2) settings.mib = static_cast<size_t>(std::atoll(argv[2]));
  if (argc > 3) settings.iters = std::atoi(argv[3]);
  if (argc > 4) settings.segment_bytes = argv[4];
  if (settings.ranks < 1 || settings.mib < 1 || settings.iters < 1) {
    std::fprintf(stderr, "usage: %s [ranks>=1] [mib>=1] [iters>=1] [segment_bytes]\n", argv[0]);
    return 2;
  }
  return Run(settings);
}
