// torchrun's and Open MPI's variables, and neither.
#include "cluster_environment.h"

namespace chorus {
namespace {

TEST_F(ClusterEnvironment, Torchrun) {
  Set("RANK", "2");
  Set("WORLD_SIZE", "4");
  Set("MASTER_ADDR", "10.0.0.5");
  Set("MASTER_PORT", "7000");
  LauncherClusterResolver resolver;
  EXPECT_EQ(resolver.name(), "TorchrunClusterResolver");
  EXPECT_EQ(resolver.num_workers(), 4);
  EXPECT_EQ(resolver.id_in_cluster(), 2);
  EXPECT_FALSE(resolver.is_leader());
  EXPECT_EQ(resolver.leader_address(), "10.0.0.5:7000");
  EXPECT_EQ(resolver.AddressOf(3), "10.0.0.5:7003");
  EXPECT_EQ(resolver.TaskNameOf(2), "worker 2");
  auto resolved = ResolveClusterFromEnvironment();
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->name(), "TorchrunClusterResolver");
}

TEST_F(ClusterEnvironment, TorchrunDefaultsAndErrors) {
  Set("RANK", "0");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "WORLD_SIZE is not set, and TorchrunClusterResolver needs it; start the process "
            "through its launcher or set the variable");
  Set("WORLD_SIZE", "2");
  LauncherClusterResolver resolver;
  EXPECT_TRUE(resolver.is_leader());
  EXPECT_EQ(resolver.AddressOf(1), "127.0.0.1:29501");
  Set("RANK", "2");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "RANK='2' is not an integer in [0, 1], which TorchrunClusterResolver needs; fix the "
            "launcher's variable or unset it");
  Set("RANK", "1");
  Set("MASTER_PORT", "http");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "MASTER_PORT='http' is not an integer in [1, 65535], which TorchrunClusterResolver "
            "needs; fix the launcher's variable or unset it");
  Set("MASTER_PORT", "65535");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "WORLD_SIZE=2 workers from MASTER_PORT=65535 need ports up to 65536, past 65535; set "
            "a lower MASTER_PORT");
}

TEST_F(ClusterEnvironment, OpenMpi) {
  Set("OMPI_COMM_WORLD_RANK", "1");
  Set("OMPI_COMM_WORLD_SIZE", "3");
  Set("SLURM_PROCID", "0");  // mpirun inside a Slurm allocation: Open MPI's rank wins
  LauncherClusterResolver resolver;
  EXPECT_EQ(resolver.name(), "OpenMpiClusterResolver");
  EXPECT_EQ(resolver.id_in_cluster(), 1);
  EXPECT_EQ(resolver.AddressOf(2), "127.0.0.1:29502");
  auto resolved = ResolveClusterFromEnvironment();
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->name(), "OpenMpiClusterResolver");
  Set("OMPI_COMM_WORLD_SIZE", "x");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "OMPI_COMM_WORLD_SIZE='x' is not an integer in [1, 2147483647], which "
            "OpenMpiClusterResolver needs; fix the launcher's variable or unset it");
}

TEST_F(ClusterEnvironment, NoLauncher) {
  EXPECT_EQ(ResolveClusterFromEnvironment(), nullptr);
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "LauncherClusterResolver found neither torchrun's RANK and WORLD_SIZE nor Open MPI's "
            "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE; start the processes with torchrun or "
            "mpirun, or set those variables");
}

}  // namespace
}  // namespace chorus
