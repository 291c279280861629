// LauncherClusterResolver: the rank and size torchrun (RANK, WORLD_SIZE) or Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) give each process; workers listen at
// MASTER_ADDR:MASTER_PORT + rank.
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>

#include <limits>

#include "base/socket_util.h"
#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus {
namespace {

struct LauncherVariables {
  const char* launcher;  // as in the resolver's name
  const char* rank;
  const char* size;
};

constexpr LauncherVariables kTorchrun = {"Torchrun", "RANK", "WORLD_SIZE"};
constexpr LauncherVariables kOpenMpi = {"OpenMpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};

using cluster_internal::Fail;

const LauncherVariables& DetectLauncher() {
  for (const LauncherVariables* vars : {&kTorchrun, &kOpenMpi}) {
    if (GetEnv(vars->rank) || GetEnv(vars->size)) return *vars;
  }
  Fail(
      "LauncherClusterResolver found neither torchrun's RANK and WORLD_SIZE nor Open MPI's "
      "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE; start the processes with torchrun or "
      "mpirun, or set those variables");
}

std::pair<std::string, SimpleClusterResolver> FromEnvironment() {
  const LauncherVariables& vars = DetectLauncher();
  const std::string resolver = std::string(vars.launcher) + "ClusterResolver";
  const long long size =
      cluster_internal::RequiredEnvInteger(vars.size, 1, std::numeric_limits<int>::max(), resolver);
  const long long rank = cluster_internal::RequiredEnvInteger(vars.rank, 0, size - 1, resolver);
  const std::string host = GetEnv("MASTER_ADDR").value_or("127.0.0.1");
  const long long port =
      cluster_internal::OptionalEnvInteger("MASTER_PORT", 29500, 1, 65535, resolver);
  if (port + size - 1 > 65535) {
    Fail(std::string(vars.size) + "=" + std::to_string(size) +
         " workers from MASTER_PORT=" + std::to_string(port) + " need ports up to " +
         std::to_string(port + size - 1) + ", past 65535; set a lower MASTER_PORT");
  }
  std::vector<std::string> workers;
  for (long long i = 0; i < size; ++i)
    workers.push_back(JoinHostPort(host, static_cast<uint16_t>(port + i)));
  return {vars.launcher, SimpleClusterResolver({{"worker", std::move(workers)}}, "worker",
                                               static_cast<int>(rank))};
}

}  // namespace

LauncherClusterResolver::LauncherClusterResolver() : LauncherClusterResolver(FromEnvironment()) {}

LauncherClusterResolver::LauncherClusterResolver(
    std::pair<std::string, SimpleClusterResolver> resolved)
    : SimpleClusterResolver(std::move(resolved.second)), launcher_(std::move(resolved.first)) {}

}  // namespace chorus
