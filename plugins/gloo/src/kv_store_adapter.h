// The chorus_kv_store the core hands to create, as the set-up (connect.cc) uses it.
#ifndef CHORUS_PLUGINS_GLOO_KV_STORE_ADAPTER_H_
#define CHORUS_PLUGINS_GLOO_KV_STORE_ADAPTER_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::gloo_plugin {

// Each rank publishes its pairs' addresses and its report through this and reads the others'.
// Every get is bounded by the communicator's time-out. A key that does not appear in time throws
// sdk::Error(CHORUS_TIMEOUT) naming the rank that did not arrive; a failing store call throws
// sdk::Error with the store's status. Used only during create.
class KvStoreAdapter {
 public:
  // `store` is borrowed and must outlive this object.
  KvStoreAdapter(const chorus_kv_store& store, int64_t timeout_ms, int rank, int size);

  void set(const std::string& key, const std::vector<char>& data);
  std::vector<char> get(const std::string& key);
  const chorus_kv_store& table() const { return store_; }

 private:
  [[noreturn]] void Failed(chorus_status status, const char* call,
                           const std::vector<std::string>& keys, int64_t timeout_ms) const;

  const chorus_kv_store& store_;
  int64_t timeout_ms_;
  int rank_;
  int size_;
};

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_KV_STORE_ADAPTER_H_
