// Which machine this process runs on: what the core hands collectives as host_id (plugin.h 1.1)
// and what the scores' job shape counts hosts by.
#ifndef CHORUS_CLUSTER_RESOLVER_HOST_IDENTITY_H_
#define CHORUS_CLUSTER_RESOLVER_HOST_IDENTITY_H_

#include <string>

namespace chorus {

// CHORUS_HOST_ID when set (as NCCL_HOSTID: to group processes by something else than the
// machine, e.g. to try a two-host layout on one machine), else "hostname/boot-id", which two
// processes share exactly when they run on one machine.
std::string HostIdentity();

}  // namespace chorus

#endif  // CHORUS_CLUSTER_RESOLVER_HOST_IDENTITY_H_
