#include "plugin_ranks.h"

#include <chorus/base/error.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace chorus::gloo_test {

const PluginLibrary& GlooLibrary() {
  static const std::shared_ptr<PluginLibrary> library = [] {
    std::string reason;
    auto loaded = PluginLibrary::Load(CHORUS_GLOO_PLUGIN_PATH, &reason);
    if (loaded == nullptr) {
      ADD_FAILURE() << "cannot load " << CHORUS_GLOO_PLUGIN_PATH << ": " << reason;
      std::abort();
    }
    return loaded;
  }();
  return *library;
}

const chorus_collective_api& Gloo() {
  const chorus_collective_api* api = GlooLibrary().collective();
  if (api == nullptr) {
    ADD_FAILURE() << "libchorus-gloo.so provides no collective";
    std::abort();
  }
  return *api;
}

std::string LastError() { return GlooLibrary().LastError(); }

void OnRanks(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int rank = 0; rank < size; ++rank) threads.emplace_back(fn, rank);
  for (std::thread& thread : threads) thread.join();
}

Job::Job(int size) : size_(size) {
  std::shared_ptr<KvStore> store = MakeInProcessStore();
  for (int rank = 0; rank < size; ++rank) {
    stores_.push_back(std::make_unique<CKvStore>(WithPrefix(store, "comm/")));
  }
}

Created Job::Create(int rank, const OptionList& options, int64_t timeout_ms) const {
  std::vector<chorus_option> c_options;
  for (const auto& [key, value] : options) c_options.push_back({key.c_str(), value.c_str()});
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = rank;
  args.size = size_;
  args.store = store(rank);
  args.timeout_ms = timeout_ms;
  args.options = c_options.data();
  args.num_options = c_options.size();
  Created created;
  const auto start = std::chrono::steady_clock::now();
  created.status = Gloo().create(&args, &created.comm);
  created.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (created.status != CHORUS_OK) created.message = LastError();
  return created;
}

RankGroup::RankGroup(int size, const OptionList& options, int64_t timeout_ms)
    : job_(size), created_(size) {
  OnRanks(size, [&](int rank) { created_[rank] = job_.Create(rank, options, timeout_ms); });
}

RankGroup::~RankGroup() {
  // At once: destroy may end with a barrier (after ring_chunked).
  OnRanks(size(), [&](int rank) {
    if (created_[rank].comm != nullptr) Gloo().destroy(created_[rank].comm);
  });
}

std::string RankGroup::CreateError() const {
  for (int rank = 0; rank < size(); ++rank) {
    if (created_[rank].status != CHORUS_OK) {
      return "rank " + std::to_string(rank) + ": " + StatusName(created_[rank].status) + ": " +
             created_[rank].message;
    }
  }
  return "";
}

}  // namespace chorus::gloo_test
