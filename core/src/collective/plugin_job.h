// The chorus_job and object_id (plugin.h, 1.6) the core hands every communicator and transport
// endpoint it creates, so a plugin can name what is per job or per object (a shared-memory
// segment, a socket folder) without agreeing on a name through the store itself.
//
// The job's id is drawn by the first process that asks the job's store for it (a counter in the
// store decides which) and read by every other; an object's id likewise by the first of its
// ranks, in the object's own store scope under a generation counter (the n-th object this rank
// creates there), so an object created again after a failure gets a new id. Neither waits for a
// rank that has not come yet: a create still starts in any order. Each costs a few store round
// trips at create.
#ifndef CHORUS_CORE_PLUGIN_JOB_H_
#define CHORUS_CORE_PLUGIN_JOB_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <string>

namespace chorus::internal {

// The job's id in `store` (16 hex digits). `who` names the caller in a time-out's message.
std::string JobIdOf(const chorus_kv_store& store, int64_t timeout_ms, const std::string& who);

// "<job id>-<16 hex digits>": the same on every rank of the object that calls it with the same
// store scope, new for every object.
std::string ObjectIdOf(const chorus_kv_store& store, int rank, const std::string& job_id,
                       int64_t timeout_ms, const std::string& who);

// A chorus_job with the strings it points to. Not copyable: `job` points into it.
struct PluginJob {
  PluginJob(std::string job_id, uint32_t task_index, uint32_t num_tasks, std::string host_id,
            const chorus_kv_store* store, int64_t timeout_ms, std::string object_id);
  PluginJob(const PluginJob&) = delete;
  PluginJob& operator=(const PluginJob&) = delete;

  std::string id, host_id, object_id;
  chorus_job job{};
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_PLUGIN_JOB_H_
