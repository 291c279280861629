// Helpers for the ring-grpc tests: the plugin loaded through the core's loader, rings of ranks
// as threads (the conformance kit's harness), and exact test data in every dtype.
#ifndef CHORUS_PLUGINS_RING_GRPC_TESTS_RING_TEST_SUPPORT_H_
#define CHORUS_PLUGINS_RING_GRPC_TESTS_RING_TEST_SUPPORT_H_

#include <chorus/conformance/rank_threads.h>
#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::ring_grpc::test {

using conformance::RankCommunicator;
using conformance::ThreadJob;

// The plugin and its collective table (loaded once per process; the test fails when it cannot
// be).
const std::shared_ptr<PluginLibrary>& Plugin();
const chorus_collective_api& Collective();
// The calling thread's last error in the plugin.
std::string LastError();

// Rank `rank` of `size`'s communicator over `job`, created on the calling thread; its status()
// says how create went.
std::unique_ptr<RankCommunicator> CreateCommunicator(const ThreadJob& job, int rank, int size,
                                                     int64_t timeout_ms,
                                                     const Options& options = {});

// A ring of `size` ranks as threads: the communicators are created at once, body(rank, comm)
// runs on each rank's thread (comm.Destroy() leaves early), and they are destroyed at once.
// Expects every create to succeed, and no rank to throw.
void RunRing(int size, int64_t timeout_ms, const Options& options,
             const std::function<void(int rank, RankCommunicator& comm)>& body);

// The dtypes the tests sweep: every one of plugin.h.

// `values` in `dtype`'s representation (values must be exact in it).
std::vector<uint8_t> Encode(chorus_dtype dtype, const std::vector<double>& values);

// Elementwise reduction of double values (exact small integers).
double Combine(chorus_reduce_op op, double a, double b);

// The index of the first element where two encoded buffers differ, or -1.
int64_t FirstDifference(chorus_dtype dtype, const std::vector<uint8_t>& a,
                        const std::vector<uint8_t>& b);

}  // namespace chorus::ring_grpc::test

#endif  // CHORUS_PLUGINS_RING_GRPC_TESTS_RING_TEST_SUPPORT_H_
