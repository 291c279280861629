// Gloo's rendezvous store interface over the chorus_kv_store the core hands to create.
#ifndef CHORUS_PLUGINS_GLOO_KV_STORE_ADAPTER_H_
#define CHORUS_PLUGINS_GLOO_KV_STORE_ADAPTER_H_

#include <chorus/plugin.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::gloo_plugin {

// gloo::rendezvous::Context::connectFullMesh publishes each rank's addresses through this and
// reads the others'. Gloo's get() has no time-out of its own (it expects get to block until the
// key exists), so every get and wait here is bounded by the communicator's time-out. A key that
// does not appear in time throws sdk::Error(CHORUS_TIMEOUT) naming the rank that did not arrive;
// a failing store call throws sdk::Error with the store's status. Used only during create.
class KvStoreAdapter : public ::gloo::rendezvous::Store {
 public:
  // `store` is borrowed and must outlive this object.
  KvStoreAdapter(const chorus_kv_store& store, int64_t timeout_ms, int rank, int size);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

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
