// Bad input gives exit code 2 and a message naming the problem and the fix.
#include <gtest/gtest.h>

#include "bench_process.h"

namespace chorus::bench::testing {
namespace {

void ExpectUsageError(const std::string& args, const std::vector<std::string>& phrases) {
  const BenchResult r = RunBench(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  for (const auto& phrase : phrases) {
    EXPECT_NE(r.err.find(phrase), std::string::npos) << args << ": '" << phrase << "' not in\n"
                                                     << r.err;
  }
  EXPECT_EQ(r.out.find("\n  "), std::string::npos) << "measured anyway:\n" << r.out;  // no rows
}

TEST(BadInput, UnknownBackendListsTheAvailableOnes) {
  ExpectUsageError("--backends core_ring,nosuch",
                   {"unknown backend 'nosuch'", "core_ring", "bench_wrong"});
  ExpectUsageError("-n 2 --backends nosuch", {"unknown backend 'nosuch'", "core_ring"});
}

TEST(BadInput, UnknownCrossDeviceOpsListsTheAvailableOnes) {
  ExpectUsageError("--in-process --backends nosuch",
                   {"unknown cross-device ops 'nosuch'", "reduction_to_one_device"});
}

TEST(BadInput, BadSizes) {
  ExpectUsageError("-b 4X", {"bad size '4X'", "unknown suffix 'X'", "K, M or G"});
  ExpectUsageError("-e 1KB", {"bad size '1KB'"});
  ExpectUsageError("-b 8M -e 4K", {"-b 8M is larger than -e 4K"});
  ExpectUsageError("-f 1", {"at least 2"});
}

TEST(BadInput, BadDtypeOpAndOperation) {
  ExpectUsageError("-d f128", {"f128"});
  ExpectUsageError("-o avg", {"avg"});
  ExpectUsageError("--ops allreduce", {"unknown operation 'allreduce'", "all_reduce"});
  ExpectUsageError("--ops batch_reduce", {"batch_reduce is an --in-process operation"});
  ExpectUsageError("--in-process --ops reduce_scatter",
                   {"reduce_scatter is not a cross-device op"});
  ExpectUsageError("--in-process -n 2", {"exclude each other"});
  ExpectUsageError("--no-such-flag", {"no-such-flag"});
}

TEST(BadInput, MpiOutsideMpirunSaysToUseMpirun) {
  ExpectUsageError("-n 2 --backends mpi",
                   {"'mpi' works only in processes started by mpirun", "mpirun -n 2 chorus-bench"});
}

TEST(BadInput, DtypeTheBackendDoesNotSupport) {
  ExpectUsageError("--backends bench_wrong -d i8 -b 4K -e 4K",
                   {"backend 'bench_wrong' failed all_reduce of 4096 i8",
                    "bench_wrong does not support dtype i8", "choose another -d, -o or backend"});
}

TEST(BadInput, HostsNeedAMultipleOfWorkers) {
  ExpectUsageError("--hosts 2", {"--hosts 2 needs -n with a multiple of it"});
  ExpectUsageError("-n 3 --hosts 2", {"--hosts 2 needs -n with a multiple of it"});
}

TEST(BadInput, AMalformedHierarchicalBackendSaysTheForm) {
  ExpectUsageError("--backends core_ring+", {"backend 'core_ring+'", "local+cross"});
  ExpectUsageError("--backends core_ring+nosuch", {"backend 'core_ring+nosuch'", "'nosuch'"});
}

TEST(BadInput, SuggestRulesIsNotForCrossDeviceOps) {
  ExpectUsageError("--in-process --suggest-rules", {"--suggest-rules", "CHORUS_CROSS_DEVICE_OPS"});
}

TEST(BadInput, AutoIsForCollectivesAcrossWorkers) {
  const BenchResult r = RunBench("--auto --in-process");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--auto is for collectives across workers"), std::string::npos) << r.err;
}

TEST(BadInput, RootOutsideTheJob) {
  ExpectUsageError("--ops broadcast -r 3 -b 4K -e 4K", {"--root 3", "1 workers"});
}

TEST(BadInput, UnknownTransportListsTheAvailableOnes) {
  ExpectUsageError("--transports tcp,nosuch",
                   {"--transports names a transport 'nosuch'", "which no loaded plugin provides",
                    "Available: tcp", "bench_wrong", "store"});
  ExpectUsageError("-n 2 --transports nosuch", {"a transport 'nosuch'", "Available: tcp"});
}

TEST(BadInput, TransportsExcludeWhatOnlyCollectivesMeasure) {
  const std::string reason = "is not for --transports";
  ExpectUsageError("--transports tcp --backends core_ring", {"--backends", reason});
  ExpectUsageError("--transports tcp --ops all_gather", {"--ops", reason});
  ExpectUsageError("--transports tcp -d bf16", {"--datatype", reason});
  ExpectUsageError("--transports tcp -o max", {"--op", reason});
  ExpectUsageError("--transports tcp --in-process", {"--in-process", reason});
  ExpectUsageError("--transports tcp --kernels", {"--kernels", reason});
  ExpectUsageError("--transports tcp --plot x.svg", {"--plot", reason});
  ExpectUsageError("--transports tcp --suggest-rules", {"--suggest-rules", reason});
  ExpectUsageError("-n 4 --hosts 2 --transports tcp", {"--hosts", reason});
}

TEST(BadInput, TransportsNeedTwoWorkersAndNames) {
  ExpectUsageError("-n 3 --transports tcp", {"--transports measures between 2 workers", "-n 3"});
  ExpectUsageError("--transports tcp", {"2 workers", "has 1", "chorus-bench -n 2 --transports"});
  ExpectUsageError("--transports ''", {"--transports needs at least one name"});
  ExpectUsageError("--transports tcp,tcp", {"'tcp' twice"});
  ExpectUsageError("--window 4", {"--window is for --transports"});
  ExpectUsageError("--transports tcp --window 0", {"--window"});
}

}  // namespace
}  // namespace chorus::bench::testing
