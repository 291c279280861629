// A chorus::KvStore over the c10d::Store PyTorch hands a process group (TCPStore, FileStore,
// HashStore, PrefixStore), so that chorus's collectives rendezvous where torch.distributed did
// and need no store of their own.
#ifndef CHORUS_BINDINGS_PYTORCH_C10D_KV_STORE_H_
#define CHORUS_BINDINGS_PYTORCH_C10D_KV_STORE_H_

#include <chorus/rendezvous/kv_store.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace chorus::torch_backend {

class C10dKvStore : public KvStore {
 public:
  explicit C10dKvStore(c10::intrusive_ptr<c10d::Store> store);

  void Set(const std::string& key, const Bytes& value) override;
  Bytes Get(const std::string& key, std::chrono::milliseconds timeout) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t Add(const std::string& key, int64_t delta) override;
  bool Check(const std::string& key) override;
  bool Remove(const std::string& key) override;
  std::string Describe() const override { return description_; }

  // The host of the TCPStore under `store` (through PrefixStores), or "" for another store.
  static std::string TcpStoreHost(const c10::intrusive_ptr<c10d::Store>& store);

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string description_;
};

}  // namespace chorus::torch_backend

#endif  // CHORUS_BINDINGS_PYTORCH_C10D_KV_STORE_H_
