#include "ring_test_support.h"

#include <chorus/runtime/plugin_library.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <stdexcept>

namespace chorus::ring_grpc::test {

const std::shared_ptr<PluginLibrary>& Plugin() {
  static const std::shared_ptr<PluginLibrary> library = [] {
    std::string reason;
    auto loaded = PluginLibrary::Load(CHORUS_RING_GRPC_PLUGIN_FILE, &reason);
    if (loaded == nullptr) {
      throw std::runtime_error(std::string("cannot load ") + CHORUS_RING_GRPC_PLUGIN_FILE + ": " +
                               reason);
    }
    return loaded;
  }();
  return library;
}

const chorus_collective_api& Collective() {
  const chorus_collective_api* api = Plugin()->collective();
  if (api == nullptr) throw std::runtime_error("the plugin provides no collective");
  return *api;
}

std::string LastError() { return Plugin()->LastError(); }

std::unique_ptr<RankCommunicator> CreateCommunicator(const ThreadJob& job, int rank, int size,
                                                     int64_t timeout_ms, const Options& options) {
  return std::make_unique<RankCommunicator>(Plugin(), Collective(), job.store(rank), rank, size,
                                            conformance::CommunicatorSettings(timeout_ms, options));
}

void RunRing(int size, int64_t timeout_ms, const Options& options,
             const std::function<void(int rank, RankCommunicator& comm)>& body) {
  conformance::CommunicatorGroup ring(Plugin(), Collective(), size,
                                      conformance::CommunicatorSettings(timeout_ms, options));
  ASSERT_EQ(ring.CreateError(), "");
  EXPECT_EQ(
      conformance::RunRankThreads(size, [&](int rank) { body(rank, ring.member(rank)); }).Joined(),
      "");
}

std::vector<uint8_t> Encode(chorus_dtype dtype, const std::vector<double>& values) {
  if (chorus_dtype_size(dtype) == 0) throw std::invalid_argument("Encode: unknown dtype");
  std::vector<uint8_t> bytes(values.size() * chorus_dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) sdk::StoreElement(bytes.data(), i, dtype, values[i]);
  return bytes;
}

double Combine(chorus_reduce_op op, double a, double b) {
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return a + b;
    case CHORUS_REDUCE_PROD:
      return a * b;
    case CHORUS_REDUCE_MIN:
      return std::min(a, b);
    case CHORUS_REDUCE_MAX:
      return std::max(a, b);
    default:
      throw std::invalid_argument("Combine: not a plugin reduce op");
  }
}

int64_t FirstDifference(chorus_dtype dtype, const std::vector<uint8_t>& a,
                        const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  if (a == b) return -1;
  const size_t element = chorus_dtype_size(dtype);
  for (size_t i = 0; i * element < a.size(); ++i) {
    if (std::memcmp(a.data() + i * element, b.data() + i * element, element) != 0) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace chorus::ring_grpc::test
