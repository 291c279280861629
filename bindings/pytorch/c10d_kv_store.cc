#include "c10d_kv_store.h"

#include <chorus/base/error.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace chorus::torch_backend {
namespace {

using Clock = std::chrono::steady_clock;

std::string Join(const std::vector<std::string>& keys) {
  std::string joined;
  for (const auto& key : keys) joined += (joined.empty() ? "'" : ", '") + key + "'";
  return joined;
}

// c10d throws c10::Error (or std::runtime_error) with text only. A store that does not answer
// in time says so; anything else means the store (for a TCPStore, rank 0's server) is gone.
[[noreturn]] void Rethrow(const std::string& what, const std::string& keys) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string text = e.what();
    text = text.substr(0, text.find("\nException raised from"));  // drop c10's C++ stack
    const bool timed_out =
        text.find("imeout") != std::string::npos || text.find("imed out") != std::string::npos;
    throw Error(timed_out ? CHORUS_TIMEOUT : CHORUS_PEER_LOST,
                "the c10d store failed to " + what + " " + keys + ": " + text);
  }
}

}  // namespace

C10dKvStore::C10dKvStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {
  const std::string host = TcpStoreHost(store_);
  description_ = host.empty() ? "c10d store" : "c10d TCPStore at " + host;
}

std::string C10dKvStore::TcpStoreHost(const c10::intrusive_ptr<c10d::Store>& store) {
  c10::intrusive_ptr<c10d::Store> at = store;
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(at.get())) {
    at = prefix->getUnderlyingStore();
  }
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(at.get())) return tcp->getHost();
  return "";
}

void C10dKvStore::Set(const std::string& key, const Bytes& value) {
  try {
    store_->set(key, value);
  } catch (...) {
    Rethrow("set", Join({key}));
  }
}

Bytes C10dKvStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  Wait({key}, timeout);
  try {
    return store_->get(key);
  } catch (...) {
    Rethrow("get", Join({key}));
  }
}

// Polls check() rather than calling c10d's wait(keys, timeout): a TCPStore client holds its lock
// for the whole of a wait, so another thread of this process could not set the key meanwhile,
// and c10d's waits end in an exception whose text is the only sign of a time-out.
void C10dKvStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::microseconds(50);
  while (true) {
    bool present = false;
    try {
      present = store_->check(keys);
    } catch (...) {
      Rethrow("check", Join(keys));
    }
    if (present) return;
    if (Clock::now() >= deadline) {
      throw Error(CHORUS_TIMEOUT, "waited " + std::to_string(timeout.count()) + " ms for " +
                                      Join(keys) + " on the " + description_);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

int64_t C10dKvStore::Add(const std::string& key, int64_t delta) {
  try {
    return store_->add(key, delta);
  } catch (...) {
    Rethrow("add to", Join({key}));
  }
}

bool C10dKvStore::Check(const std::string& key) {
  try {
    return store_->check({key});
  } catch (...) {
    Rethrow("check", Join({key}));
  }
}

bool C10dKvStore::Remove(const std::string& key) {
  try {
    return store_->deleteKey(key);
  } catch (...) {
    Rethrow("delete", Join({key}));
  }
}

}  // namespace chorus::torch_backend
