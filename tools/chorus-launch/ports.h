// Free TCP ports on the loopback interface, for the workers' addresses.
#ifndef CHORUS_TOOLS_LAUNCH_PORTS_H_
#define CHORUS_TOOLS_LAUNCH_PORTS_H_

#include <vector>

namespace chorus::launch {

// `count` distinct ports that 127.0.0.1 had free just now (found by binding to port 0). Another
// process may take one before a worker binds it; a launcher that passes ports can only narrow
// that window. Throws std::runtime_error when sockets cannot be opened.
std::vector<int> PickFreePorts(int count);

}  // namespace chorus::launch

#endif  // CHORUS_TOOLS_LAUNCH_PORTS_H_
