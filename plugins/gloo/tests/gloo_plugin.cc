#include "gloo_plugin.h"

#include <cstdlib>

namespace chorus::gloo_test {

const std::shared_ptr<PluginLibrary>& GlooPlugin() {
  static const std::shared_ptr<PluginLibrary> library = [] {
    std::string reason;
    auto loaded = PluginLibrary::Load(CHORUS_GLOO_PLUGIN_PATH, &reason);
    if (loaded == nullptr) {
      ADD_FAILURE() << "cannot load " << CHORUS_GLOO_PLUGIN_PATH << ": " << reason;
      std::abort();
    }
    return loaded;
  }();
  return library;
}

const PluginLibrary& GlooLibrary() { return *GlooPlugin(); }

const chorus_collective_api& Gloo() {
  const chorus_collective_api* api = GlooLibrary().collective();
  if (api == nullptr) {
    ADD_FAILURE() << "libchorus-gloo.so provides no collective";
    std::abort();
  }
  return *api;
}

std::string LastError() { return GlooLibrary().LastError(); }

std::unique_ptr<CommunicatorGroup> Group(int size, const Options& options, int64_t timeout_ms) {
  return std::make_unique<CommunicatorGroup>(GlooPlugin(), Gloo(), size,
                                             CommunicatorSettings(timeout_ms, options));
}

std::unique_ptr<RankCommunicator> CreateRank(const ThreadJob& job, int rank, const Options& options,
                                             int64_t timeout_ms) {
  return std::make_unique<RankCommunicator>(GlooPlugin(), Gloo(), job.store(rank), rank, job.size(),
                                            CommunicatorSettings(timeout_ms, options));
}

}  // namespace chorus::gloo_test
