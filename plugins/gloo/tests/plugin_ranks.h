// The gloo plugin loaded the way the core loads it, and ranks as threads of this process, each
// with its own chorus_kv_store over one in-process store.
#ifndef CHORUS_PLUGINS_GLOO_TESTS_PLUGIN_RANKS_H_
#define CHORUS_PLUGINS_GLOO_TESTS_PLUGIN_RANKS_H_

#include <chorus/plugin.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/plugin_library.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus::gloo_test {

// The built libchorus-gloo.so, loaded once (ADD_FAILURE and a null table when it cannot be).
const PluginLibrary& GlooLibrary();
const chorus_collective_api& Gloo();
// The calling thread's last error in the plugin.
std::string LastError();

using OptionList = std::vector<std::pair<std::string, std::string>>;

// Runs fn(rank) on `size` threads at once and joins them.
void OnRanks(int size, const std::function<void(int rank)>& fn);

// What one rank's create returned.
struct Created {
  chorus_status status = CHORUS_INTERNAL;
  std::string message;
  chorus_communicator* comm = nullptr;
  double seconds = 0;  // how long create took
};

// The rendezvous of one job: a fresh in-process store, and one chorus_kv_store per rank over
// WithPrefix(store, "comm/").
class Job {
 public:
  explicit Job(int size);
  int size() const { return size_; }
  const chorus_kv_store* store(int rank) const { return stores_[rank]->get(); }
  // Calls the plugin's create for `rank` on the calling thread.
  Created Create(int rank, const OptionList& options, int64_t timeout_ms) const;

 private:
  int size_;
  std::vector<std::unique_ptr<CKvStore>> stores_;
};

// `size` communicators of one job, created at once (a thread per rank), destroyed at once.
class RankGroup {
 public:
  explicit RankGroup(int size, const OptionList& options = {}, int64_t timeout_ms = 10000);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  // Empty when every create succeeded, else the first failure's status and message.
  std::string CreateError() const;
  int size() const { return job_.size(); }
  chorus_communicator* comm(int rank) const { return created_[rank].comm; }

 private:
  Job job_;
  std::vector<Created> created_;
};

}  // namespace chorus::gloo_test

#endif  // CHORUS_PLUGINS_GLOO_TESTS_PLUGIN_RANKS_H_
