// Free TCP ports on the loopback interface, for the workers' addresses.
#ifndef CHORUS_TOOLS_LAUNCH_PORTS_H_
#define CHORUS_TOOLS_LAUNCH_PORTS_H_

#include <vector>

namespace chorus::launch {

// `count` distinct ports that 127.0.0.1 had free just now, chosen at random below the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range). A port from inside that range, once
// released, is what the kernel hands the next program that binds port 0 or connects out: UCX's
// tcp listener took a worker's port that way between choice and bind. Below the range only a
// program that names a port can take it. Falls back to ports the kernel picks when no port below
// the range is free. Throws std::runtime_error when sockets cannot be opened.
std::vector<int> PickFreePorts(int count);

}  // namespace chorus::launch

#endif  // CHORUS_TOOLS_LAUNCH_PORTS_H_
