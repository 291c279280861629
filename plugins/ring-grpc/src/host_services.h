// The core's services this plugin uses, kept between init() and shutdown(): the logger, the
// process-wide abort flag and the host reduce kernel (every dtype, SUM/PROD/MIN/MAX).
#ifndef CHORUS_PLUGINS_RING_GRPC_HOST_SERVICES_H_
#define CHORUS_PLUGINS_RING_GRPC_HOST_SERVICES_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <string>

namespace chorus::ring_grpc {

// Fails (UNSUPPORTED) when `host` lacks a service this plugin needs; NULL clears it (shutdown).
void SetHost(const chorus_host* host);

bool LogEnabled(chorus_log_level level);
void Log(chorus_log_level level, const std::string& message);

// Whether the core asked every operation to stop.
bool AbortRequested();

// dst[i] = a[i] op b[i] for i < count, with the core's kernel. dst may equal a or b.
void ReduceHost(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                chorus_reduce_op op);

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_HOST_SERVICES_H_
