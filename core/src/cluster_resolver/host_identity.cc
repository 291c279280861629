#include <chorus/base/environment.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <unistd.h>

#include <fstream>

namespace chorus {

std::string HostIdentity() {
  if (const auto id = GetEnv("CHORUS_HOST_ID"); id && !id->empty()) return *id;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(host) + "/" + boot;
}

}  // namespace chorus
