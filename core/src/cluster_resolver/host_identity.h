// Which machine this process runs on, as collectives that treat ranks on one machine apart
// (shm, hierarchical) compare it.
#ifndef CHORUS_CORE_HOST_IDENTITY_H_
#define CHORUS_CORE_HOST_IDENTITY_H_

#include <string>

namespace chorus::internal {

// CHORUS_HOST_ID when set (as NCCL_HOSTID: to group processes by something else than the
// machine, e.g. to try a two-host layout on one machine), else "hostname/boot-id", which two
// processes share exactly when they run on one machine.
std::string HostIdentity();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_HOST_IDENTITY_H_
