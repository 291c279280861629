// Compiled programs by their text: the first call that needs a program compiles it, every later
// call with the same operation, dtypes, sizes and replicas runs the executable it left.
#ifndef CHORUS_PLUGINS_TPU_PROGRAM_CACHE_H_
#define CHORUS_PLUGINS_TPU_PROGRAM_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pjrt_client.h"

namespace chorus::tpu {

class ProgramCache {
 public:
  // At most this many programs are kept; one more empties the cache (a job's programs are a few
  // dozen: one per distinct tensor size and operation).
  static constexpr size_t kCapacity = 1024;

  // The executable of `mlir` for `num_replicas` replicas (`portable`: one replica run on any
  // device; `device_ids`: replica r on PJRT device device_ids[r], else the client's first
  // devices), compiled by `client` on first use. Compiles hold the cache's lock: two threads
  // that need one program compile it once.
  std::shared_ptr<const PjrtExecutable> Get(const PjrtClient& client, const std::string& mlir,
                                            int num_replicas, bool portable = false,
                                            const std::vector<int64_t>& device_ids = {});

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const PjrtExecutable>> programs_;
  uint64_t compiled_ = 0;  // for the log
};

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_PROGRAM_CACHE_H_
