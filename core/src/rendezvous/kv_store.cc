// The in-process store, the prefixed view, and the C table over any KvStore.
#include <chorus/base/error.h>
#include <chorus/rendezvous/kv_store.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "base/logging.h"
#include "rendezvous/kv_store_internal.h"

namespace chorus {
namespace {

class InProcessStore : public KvStore {
 public:
  void Set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }
  Bytes Get(const std::string& key, std::chrono::milliseconds timeout) override {
    Wait({key}, timeout);
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.at(key);
  }
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool all = changed_.wait_for(lock, timeout, [&] {
      for (const std::string& key : keys) {
        if (values_.count(key) == 0) return false;
      }
      return true;
    });
    if (!all) ThrowStoreTimeout(*this, keys, timeout);
  }
  int64_t Add(const std::string& key, int64_t delta) override {
    int64_t value = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = values_.find(key);
      if (it != values_.end()) value = ParseStoredCounter(it->second, key, Describe());
      value += delta;
      values_[key] = ToBytes(std::to_string(value));
    }
    changed_.notify_all();
    return value;
  }
  bool Check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.count(key) != 0;
  }
  bool Remove(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.erase(key) != 0;
  }
  std::string Describe() const override { return "in-process store"; }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> values_;
};

class PrefixedStore : public KvStore {
 public:
  PrefixedStore(std::shared_ptr<KvStore> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}
  void Set(const std::string& key, const Bytes& value) override {
    store_->Set(prefix_ + key, value);
  }
  Bytes Get(const std::string& key, std::chrono::milliseconds timeout) override {
    return store_->Get(prefix_ + key, timeout);
  }
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<std::string> full;
    for (const std::string& key : keys) full.push_back(prefix_ + key);
    store_->Wait(full, timeout);
  }
  int64_t Add(const std::string& key, int64_t delta) override {
    return store_->Add(prefix_ + key, delta);
  }
  bool Check(const std::string& key) override { return store_->Check(prefix_ + key); }
  bool Remove(const std::string& key) override { return store_->Remove(prefix_ + key); }
  std::string Describe() const override { return store_->Describe(); }

 private:
  std::shared_ptr<KvStore> store_;
  std::string prefix_;
};

KvStore& StoreOf(void* ctx) { return static_cast<CKvStore*>(ctx)->store(); }

// Runs fn; an exception becomes its status, with the message logged (the C table has no
// last_error of its own).
template <typename F>
chorus_status Guarded(const char* what, F&& fn) {
  try {
    fn();
    return CHORUS_OK;
  } catch (const Error& e) {
    if (e.status() != CHORUS_TIMEOUT) Log().warn("rendezvous {}: {}", what, e.what());
    return e.status();
  } catch (const std::exception& e) {
    Log().warn("rendezvous {}: {}", what, e.what());
    return CHORUS_INTERNAL;
  }
}

}  // namespace

std::shared_ptr<KvStore> MakeInProcessStore() { return std::make_shared<InProcessStore>(); }

std::shared_ptr<KvStore> WithPrefix(std::shared_ptr<KvStore> store, std::string prefix) {
  return std::make_shared<PrefixedStore>(std::move(store), std::move(prefix));
}

CKvStore::CKvStore(std::shared_ptr<KvStore> store) : store_(std::move(store)) {
  table_.struct_size = sizeof(table_);
  table_.ctx = this;
  table_.set = [](void* ctx, const char* key, const void* value, size_t size) {
    if (key == nullptr || (value == nullptr && size > 0)) return CHORUS_INVALID_ARGUMENT;
    return Guarded("set", [&] {
      const auto* bytes = static_cast<const uint8_t*>(value);
      StoreOf(ctx).Set(key, Bytes(bytes, bytes + size));
    });
  };
  table_.get = [](void* ctx, const char* key, int64_t timeout_ms, void* value, size_t capacity,
                  size_t* size) {
    if (key == nullptr || size == nullptr || (value == nullptr && capacity > 0)) {
      return CHORUS_INVALID_ARGUMENT;
    }
    return Guarded("get", [&] {
      const Bytes bytes = StoreOf(ctx).Get(
          key, std::chrono::milliseconds(timeout_ms < 0 ? INT64_MAX / 1000000 : timeout_ms));
      *size = bytes.size();
      if (!bytes.empty() && capacity > 0) {
        std::memcpy(value, bytes.data(), std::min(capacity, bytes.size()));
      }
    });
  };
  table_.wait = [](void* ctx, const char* const* keys, size_t num_keys, int64_t timeout_ms) {
    if (keys == nullptr && num_keys > 0) return CHORUS_INVALID_ARGUMENT;
    return Guarded("wait", [&] {
      std::vector<std::string> names(keys, keys + num_keys);
      StoreOf(ctx).Wait(
          names, std::chrono::milliseconds(timeout_ms < 0 ? INT64_MAX / 1000000 : timeout_ms));
    });
  };
  table_.add = [](void* ctx, const char* key, int64_t delta, int64_t* result) {
    if (key == nullptr || result == nullptr) return CHORUS_INVALID_ARGUMENT;
    return Guarded("add", [&] { *result = StoreOf(ctx).Add(key, delta); });
  };
  table_.check = [](void* ctx, const char* key, int* exists) {
    if (key == nullptr || exists == nullptr) return CHORUS_INVALID_ARGUMENT;
    return Guarded("check", [&] { *exists = StoreOf(ctx).Check(key) ? 1 : 0; });
  };
  table_.remove = [](void* ctx, const char* key) {
    if (key == nullptr) return CHORUS_INVALID_ARGUMENT;
    chorus_status status = CHORUS_OK;
    const chorus_status guarded = Guarded("remove", [&] {
      if (!StoreOf(ctx).Remove(key)) status = CHORUS_NOT_FOUND;
    });
    return guarded != CHORUS_OK ? guarded : status;
  };
}

}  // namespace chorus
