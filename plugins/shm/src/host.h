// The core's services as the shm plugin uses them: logging, the abort flag and the host's
// elementwise reduce (every dtype, vectorised), set by init() and cleared by shutdown().
#ifndef CHORUS_SHM_HOST_H_
#define CHORUS_SHM_HOST_H_

#include <chorus/plugin.h>

#include <string>

namespace chorus::shm {

void SetHost(const chorus_host* host);
void Log(chorus_log_level level, const std::string& message);
bool HostAbortRequested();
// dst = a op b over count elements (dst may equal a). Throws sdk::Error with the host's status.
void Reduce(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
            chorus_reduce_op op);

}  // namespace chorus::shm

#endif  // CHORUS_SHM_HOST_H_
