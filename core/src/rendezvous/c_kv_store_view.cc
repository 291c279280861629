#include "rendezvous/c_kv_store_view.h"

#include <chorus/base/error.h>

#include <string>
#include <vector>

namespace chorus::internal {
namespace {

class CStoreView : public KvStore {
 public:
  explicit CStoreView(const chorus_kv_store* store) : store_(*store) {}

  void Set(const std::string& key, const Bytes& value) override {
    Check(store_.set(store_.ctx, key.c_str(), value.data(), value.size()), "set", key);
  }
  Bytes Get(const std::string& key, std::chrono::milliseconds timeout) override {
    Bytes value(256);
    size_t size = 0;
    Check(store_.get(store_.ctx, key.c_str(), timeout.count(), value.data(), value.size(), &size),
          "get", key);
    if (size > value.size()) {
      value.resize(size);
      Check(store_.get(store_.ctx, key.c_str(), timeout.count(), value.data(), value.size(), &size),
            "get", key);
    }
    value.resize(size);
    return value;
  }
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<const char*> names;
    for (const std::string& key : keys) names.push_back(key.c_str());
    Check(store_.wait(store_.ctx, names.data(), names.size(), timeout.count()), "wait",
          keys.empty() ? "" : keys.front());
  }
  int64_t Add(const std::string& key, int64_t delta) override {
    int64_t result = 0;
    Check(store_.add(store_.ctx, key.c_str(), delta, &result), "add", key);
    return result;
  }
  bool Check(const std::string& key) override {
    int exists = 0;
    Check(store_.check(store_.ctx, key.c_str(), &exists), "check", key);
    return exists != 0;
  }
  bool Remove(const std::string& key) override {
    const chorus_status status = store_.remove(store_.ctx, key.c_str());
    if (status == CHORUS_NOT_FOUND) return false;
    Check(status, "remove", key);
    return true;
  }
  std::string Describe() const override { return "rendezvous store handed to the collective"; }

 private:
  void Check(chorus_status status, const char* what, const std::string& key) const {
    if (status == CHORUS_OK) return;
    throw Error(status, std::string("rendezvous ") + what + " of '" + key + "' failed with " +
                            StatusName(status) +
                            (status == CHORUS_TIMEOUT ? " (a rank did not arrive in time)" : ""));
  }

  const chorus_kv_store& store_;
};

}  // namespace

std::shared_ptr<KvStore> ViewOfCStore(const chorus_kv_store* store) {
  return std::make_shared<CStoreView>(store);
}

}  // namespace chorus::internal
