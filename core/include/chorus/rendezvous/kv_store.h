// The rendezvous key-value store that workers of one job share: set, get and wait with a
// time-out, atomic add, check, remove. Implementations: in-process (threads as ranks, tests),
// file-based (a directory every worker sees), and TCP (served by the leader). The core hands a
// store to plugins as a chorus_kv_store (plugin.h), scoped to a prefix of its own.
#ifndef CHORUS_KV_STORE_H_
#define CHORUS_KV_STORE_H_

#include <chorus/plugin.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

using Bytes = std::vector<uint8_t>;

// Thread-safe. Every wait takes a time-out and throws Error(CHORUS_TIMEOUT) naming the key(s)
// it waited for; a store whose server went away throws Error(CHORUS_PEER_LOST).
class KvStore {
 public:
  virtual ~KvStore() = default;
  // Stores `value` under `key`, replacing any older value.
  virtual void Set(const std::string& key, const Bytes& value) = 0;
  // Waits up to `timeout` for `key`, then returns its value.
  virtual Bytes Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Waits up to `timeout` until every key exists.
  virtual void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Adds `delta` to the integer under `key` (absent = 0) and returns the new value. The value is
  // stored as decimal text, so Get of the key returns e.g. "3".
  virtual int64_t Add(const std::string& key, int64_t delta) = 0;
  // Whether `key` exists now. Does not wait.
  virtual bool Check(const std::string& key) = 0;
  // Removes `key`; false when it was absent.
  virtual bool Remove(const std::string& key) = 0;
  // What the store is, for messages: "in-process store", "tcp store 127.0.0.1:5000", ...
  virtual std::string Describe() const = 0;
};

// A store in this process's memory.
std::shared_ptr<KvStore> MakeInProcessStore();

// A view of `store` in which every key is prefixed with `prefix` (e.g. "comm/3/").
std::shared_ptr<KvStore> WithPrefix(std::shared_ptr<KvStore> store, std::string prefix);

// Helpers for string values.
inline Bytes ToBytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string ToString(const Bytes& b) { return std::string(b.begin(), b.end()); }

// A chorus_kv_store (plugin.h) over a KvStore, for handing to a plugin. Catches every exception
// and returns its status; the message goes to the core's log. Lives as long as this object,
// which must outlive the plugin object it was handed to.
class CKvStore {
 public:
  explicit CKvStore(std::shared_ptr<KvStore> store);
  CKvStore(const CKvStore&) = delete;
  CKvStore& operator=(const CKvStore&) = delete;
  const chorus_kv_store* get() const { return &table_; }
  KvStore& store() const { return *store_; }

 private:
  std::shared_ptr<KvStore> store_;
  chorus_kv_store table_{};
};

}  // namespace chorus

#endif  // CHORUS_KV_STORE_H_
