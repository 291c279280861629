// The gloo plugin loaded the way the core loads it, and its communicators on ranks as threads of
// this process (the conformance kit's harness, chorus/conformance/rank_threads.h).
#ifndef CHORUS_PLUGINS_GLOO_TESTS_GLOO_PLUGIN_H_
#define CHORUS_PLUGINS_GLOO_TESTS_GLOO_PLUGIN_H_

#include <chorus/conformance/rank_threads.h>
#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace chorus::gloo_test {

using conformance::CommunicatorGroup;
using conformance::CommunicatorSettings;
using conformance::RankCommunicator;
using conformance::ThreadJob;

// The built libchorus-gloo.so, loaded once (ADD_FAILURE and abort when it cannot be).
const std::shared_ptr<PluginLibrary>& GlooPlugin();
const PluginLibrary& GlooLibrary();
const chorus_collective_api& Gloo();
// The calling thread's last error in the plugin.
std::string LastError();

// Runs fn(rank) on `size` rank threads at once; a rank that throws fails the test, naming it.
template <typename Body>
void OnRanks(int size, Body&& fn) {
  EXPECT_EQ(conformance::RunRankThreads(size, std::forward<Body>(fn)).Joined(), "");
}

// `size` gloo communicators of one job, created at once on rank threads, destroyed at once.
std::unique_ptr<CommunicatorGroup> Group(int size, const Options& options = {},
                                         int64_t timeout_ms = 10000);

// Rank `rank`'s gloo communicator over `job`, created on the calling thread.
std::unique_ptr<RankCommunicator> CreateRank(const ThreadJob& job, int rank, const Options& options,
                                             int64_t timeout_ms);

}  // namespace chorus::gloo_test

#endif  // CHORUS_PLUGINS_GLOO_TESTS_GLOO_PLUGIN_H_
