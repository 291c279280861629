#include "collective/plugin_job.h"

#include <chorus/base/error.h>

#include <algorithm>

#include "base/hmac_sha256.h"

namespace chorus::internal {
namespace {

void Check(chorus_status status, const std::string& what) {
  if (status != CHORUS_OK) throw Error(status, what);
}

int64_t Add(const chorus_kv_store& store, const std::string& key, const std::string& who) {
  int64_t value = 0;
  Check(store.add(store.ctx, key.c_str(), 1, &value),
        who + ": could not update '" + key + "' in the rendezvous store");
  return value;
}

// Whoever claimed the key sets it; the others wait for it.
std::string Get(const chorus_kv_store& store, const std::string& key, int64_t timeout_ms,
                const std::string& who, const std::string& from) {
  char value[64] = {};
  size_t size = 0;
  const chorus_status status =
      store.get(store.ctx, key.c_str(), timeout_ms, value, sizeof value, &size);
  if (status == CHORUS_TIMEOUT) {
    throw Error(CHORUS_TIMEOUT, who + ": waited " + std::to_string(timeout_ms) + " ms for " + from +
                                    " to publish '" + key +
                                    "' in the rendezvous store; is it running, in the same job?");
  }
  Check(status, who + ": could not read '" + key + "' from the rendezvous store");
  return std::string(value, std::min(size, sizeof value));
}

void Set(const chorus_kv_store& store, const std::string& key, const std::string& value,
         const std::string& who) {
  Check(store.set(store.ctx, key.c_str(), value.data(), value.size()),
        who + ": could not write '" + key + "' to the rendezvous store");
}

}  // namespace

std::string JobIdOf(const chorus_kv_store& store, int64_t timeout_ms, const std::string& who) {
  static const std::string kKey = "chorus/job-id";
  if (Add(store, kKey + "/claims", who) == 1) Set(store, kKey, RandomHex(8), who);
  return Get(store, kKey, timeout_ms, who, "the job's first process");
}

std::string ObjectIdOf(const chorus_kv_store& store, int rank, const std::string& job_id,
                       int64_t timeout_ms, const std::string& who) {
  const int64_t generation = Add(store, "chorus/object-id/creates/" + std::to_string(rank), who);
  const std::string key = "chorus/object-id/" + std::to_string(generation);
  if (Add(store, key + "/claims", who) == 1) Set(store, key, RandomHex(8), who);
  return job_id + "-" + Get(store, key, timeout_ms, who, "the rank that drew it");
}

PluginJob::PluginJob(std::string job_id, uint32_t task_index, uint32_t num_tasks,
                     std::string host_id_, const chorus_kv_store* store, int64_t timeout_ms,
                     std::string object_id_)
    : id(std::move(job_id)), host_id(std::move(host_id_)), object_id(std::move(object_id_)) {
  job.struct_size = sizeof(job);
  job.id = id.c_str();
  job.task_index = task_index;
  job.num_tasks = num_tasks;
  job.host_id = host_id.c_str();
  job.store = store;
  job.timeout_ms = timeout_ms;
}

}  // namespace chorus::internal
