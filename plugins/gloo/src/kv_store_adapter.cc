#include "kv_store_adapter.h"

#include <chorus/plugin_sdk.hpp>
#include <optional>
#include <string_view>

#include "gloo_errors.h"

namespace chorus::gloo_plugin {
namespace {

// The set-up (connect.cc) names its keys after the rank that publishes them:
// "setup1/addresses/3", "setup1/report/3". The rank, or nothing for any other key.
std::optional<int> PublisherOf(std::string_view key) {
  if (const size_t slash = key.rfind('/'); slash != std::string_view::npos) {
    key.remove_prefix(slash + 1);
  }
  if (key.empty() || key.size() > 9) return std::nullopt;
  int rank = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    rank = rank * 10 + (c - '0');
  }
  return rank;
}

std::string Quoted(const std::vector<std::string>& keys) {
  std::string text;
  for (const std::string& key : keys) text += (text.empty() ? "'" : ", '") + key + "'";
  return text;
}

}  // namespace

KvStoreAdapter::KvStoreAdapter(const chorus_kv_store& store, int64_t timeout_ms, int rank, int size)
    : store_(store), timeout_ms_(timeout_ms), rank_(rank), size_(size) {}

void KvStoreAdapter::Failed(chorus_status status, const char* call,
                            const std::vector<std::string>& keys, int64_t timeout_ms) const {
  if (status == CHORUS_TIMEOUT) {
    std::string who = "a rank";
    for (const std::string& key : keys) {
      if (auto rank = PublisherOf(key); rank && *rank != rank_) {
        who = "rank " + std::to_string(*rank);
        break;
      }
    }
    sdk::Fail(CHORUS_TIMEOUT, "rendezvous: rank ", rank_, " of ", size_, " waited ", timeout_ms,
              " ms for the key ", Quoted(keys), " and ", who,
              " did not arrive (is every rank started, with the same size and communicator? "
              "raise the time-out if they are slow to start)");
  }
  sdk::Fail(status, "rendezvous: the store's ", call, " of ", Quoted(keys), " failed with ",
            StatusName(status), " (the core's log has the store's message)");
}

void KvStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  const chorus_status status = store_.set(store_.ctx, key.c_str(), data.data(), data.size());
  if (status != CHORUS_OK) Failed(status, "set", {key}, timeout_ms_);
}

std::vector<char> KvStoreAdapter::get(const std::string& key) {
  std::vector<char> value(512);
  for (;;) {
    size_t size = 0;
    const chorus_status status =
        store_.get(store_.ctx, key.c_str(), timeout_ms_, value.data(), value.size(), &size);
    if (status != CHORUS_OK) Failed(status, "get", {key}, timeout_ms_);
    if (size <= value.size()) {
      value.resize(size);
      return value;
    }
    value.resize(size);  // the value is larger than the buffer: read it again, whole
  }
}

}  // namespace chorus::gloo_plugin
