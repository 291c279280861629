// The message of the signature check (core/src/collective/signature_check.h): the first rank that
// differs from rank 0, what each issues, and the collectives only where the routing differs.
#include "collective/signature_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "worker_names.h"

namespace chorus::internal {
namespace {

using test::WorkerName;
std::string Collective(int64_t index) { return index == 0 ? "shm" : "core_ring"; }

Signature AllReduce(int64_t count, int64_t backend) {
  return Signature{7, kAllReduce, count, CHORUS_F32, CHORUS_REDUCE_SUM, 0, backend};
}

TEST(SignatureCheck, EqualSignaturesPass) {
  EXPECT_EQ(SignatureMismatch({AllReduce(10, 0), AllReduce(10, 0)}, WorkerName, Collective), "");
}

TEST(SignatureCheck, ACountMismatchNamesBothWorkersAndNotTheCommonCollective) {
  const std::string message = SignatureMismatch(
      {AllReduce(10, 0), AllReduce(10, 0), AllReduce(9, 0)}, WorkerName, Collective);
  EXPECT_NE(message.find("at operation #7: worker 0 issues all_reduce of 10 f32 (sum) but worker "
                         "2 issues all_reduce of 9 f32 (sum);"),
            std::string::npos)
      << message;
}

TEST(SignatureCheck, ARoutingMismatchNamesEachWorkersCollective) {
  const std::string message =
      SignatureMismatch({AllReduce(10, 0), AllReduce(10, 1)}, WorkerName, Collective);
  EXPECT_NE(message.find("worker 0 issues all_reduce of 10 f32 (sum) on shm but worker 1 issues "
                         "all_reduce of 10 f32 (sum) on core_ring"),
            std::string::npos)
      << message;
}

TEST(SignatureCheck, ABroadcastNamesItsRoot) {
  Signature broadcast{0, kBroadcast, 4, CHORUS_I32, 0, 1, 0};
  EXPECT_EQ(DescribeSignature(broadcast, Collective), "broadcast of 4 i32 from rank 1 on shm");
  EXPECT_EQ(DescribeSignature(broadcast, {}), "broadcast of 4 i32 from rank 1");
}

}  // namespace
}  // namespace chorus::internal
