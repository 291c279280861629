// peer_process.h: which process a rank runs in, so that a rank on the same host can tell that a
// peer's process is gone without UCX's help. UCX's shared-memory transports (posix, sysv) offer
// no peer-failure handling, so a receive from a SIGKILLed peer over them would never end; the
// endpoint publishes its process beside its worker address and a waiting rank on the same host
// looks at /proc/<pid>/stat of the peer it waits for.
#ifndef CHORUS_PLUGINS_UCX_PEER_PROCESS_H_
#define CHORUS_PLUGINS_UCX_PEER_PROCESS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace chorus::ucx {

struct ProcessIdentity {
  int64_t pid = 0;
  uint64_t start_time =
      0;             // clock ticks since boot (/proc/<pid>/stat field 22): tells a reused pid
  std::string host;  // boot id and pid namespace: equal only where the pid means the same
};

ProcessIdentity ThisProcess();

// False once the process has exited (also a zombie, or its pid reused by another process).
bool ProcessAlive(const ProcessIdentity& process);

// One endpoint's entry in the rendezvous store: its process and its UCP worker address.
struct PeerRecord {
  ProcessIdentity process;
  // The job's name of the rank's host (the create args' host_id, e.g. CHORUS_HOST_ID): ranks of
  // one machine that the job counts as different hosts (chorus-bench --hosts) are reached as
  // peers on another host, over UCX's network path, as the job's shape and the score assume.
  std::string host_id;
  std::string worker_address;  // bytes of a ucp_address_t
};
std::string EncodeRecord(const PeerRecord& record);
// Throws INTERNAL naming `rank` when the bytes are no record.
PeerRecord DecodeRecord(std::string_view bytes, int rank);

}  // namespace chorus::ucx

#endif  // CHORUS_PLUGINS_UCX_PEER_PROCESS_H_
