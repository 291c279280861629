// Helpers shared by the KvStore implementations (in-process, file, TCP), so they word their
// errors alike.
#ifndef CHORUS_KV_STORE_INTERNAL_H_
#define CHORUS_KV_STORE_INTERNAL_H_

#include <chorus/base/error.h>
#include <chorus/rendezvous/kv_store.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus {

[[noreturn]] inline void ThrowStoreTimeout(const KvStore& store,
                                           const std::vector<std::string>& keys,
                                           std::chrono::milliseconds timeout) {
  std::string names;
  for (const std::string& key : keys) names += (names.empty() ? "'" : ", '") + key + "'";
  throw Error(CHORUS_TIMEOUT, "rendezvous: waited " + std::to_string(timeout.count()) +
                                  " ms on the " + store.Describe() + " for " + names +
                                  "; a worker did not arrive (is every worker started, with the "
                                  "same cluster? raise CHORUS_TIMEOUT_SECONDS if they are slow)");
}

// The counter Add keeps under `key` (decimal text). Throws Error(CHORUS_INVALID_ARGUMENT) when
// the value is not an integer.
inline int64_t ParseStoredCounter(const Bytes& value, const std::string& key,
                                  const std::string& store) {
  const char* first = reinterpret_cast<const char*>(value.data());
  const char* last = first + value.size();
  int64_t result = 0;
  const auto [end, error] = std::from_chars(first, last, result);
  if (value.empty() || error != std::errc() || end != last) {
    throw Error(CHORUS_INVALID_ARGUMENT, "rendezvous: Add on '" + key + "' in the " + store +
                                             ", whose value is not an integer");
  }
  return result;
}

}  // namespace chorus

#endif  // CHORUS_KV_STORE_INTERNAL_H_
