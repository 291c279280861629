// Gloo's failure messages (as this Gloo words them) map to the chorus statuses.
#include "gloo_errors.h"

#include <gloo/common/error.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

namespace chorus::gloo_plugin {
namespace {

using testing::AllOf;
using testing::HasSubstr;

TEST(GlooErrorMapping, TimeoutsAreTimeout) {
  EXPECT_EQ(StatusOfGlooMessage("[./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                                "2000ms for recv operation to complete"),
            CHORUS_TIMEOUT);
  EXPECT_EQ(StatusOfGlooMessage("[gloo/transport/tcp/buffer.cc:72] Read timeout [127.0.0.1]:5"),
            CHORUS_TIMEOUT);
}

TEST(GlooErrorMapping, ClosedOrResetConnectionsArePeerLost) {
  EXPECT_EQ(StatusOfGlooMessage("[./gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                                "[127.0.0.1]:50386"),
            CHORUS_PEER_LOST);
  EXPECT_EQ(StatusOfGlooMessage("[./gloo/transport/tcp/pair.cc:589] Read error "
                                "[127.0.0.1]:65437: Connection reset by peer"),
            CHORUS_PEER_LOST);
  EXPECT_EQ(StatusOfGlooMessage("writev [127.0.0.1]:1: Broken pipe"), CHORUS_PEER_LOST);
  EXPECT_EQ(StatusOfGlooMessage("connect [10.0.0.2]:7: Connection refused"), CHORUS_PEER_LOST);
}

TEST(GlooErrorMapping, EverythingElseIsInternal) {
  EXPECT_EQ(StatusOfGlooMessage("[enforce fail at gloo/allreduce.cc:39] opts.elements > 0"),
            CHORUS_INTERNAL);
}

TEST(GlooErrorMapping, MessagesQuoteGloo) {
  EXPECT_EQ(
      DescribeGlooFailure(CHORUS_PEER_LOST, "gloo barrier (rank 1 of 2)", "Connection reset", 100),
      "gloo barrier (rank 1 of 2): a peer closed its connection: Gloo: Connection reset (the "
      "process may have died)");
  EXPECT_THAT(DescribeGlooFailure(CHORUS_TIMEOUT, "gloo x", "Timed out waiting", 250),
              AllOf(HasSubstr("gloo x: timed out"), HasSubstr("250 ms"),
                    HasSubstr("Gloo: Timed out waiting")));
}

sdk::Error Translated(auto thrower) {
  try {
    thrower();
  } catch (...) {
    return TranslateCurrentException("gloo op", 100);
  }
  return sdk::Error(CHORUS_OK, "nothing thrown");
}

TEST(GlooErrorMapping, TranslatesExceptionsByType) {
  const sdk::Error invalid =
      Translated([] { throw ::gloo::InvalidOperationException("Invalid timeout"); });
  EXPECT_EQ(invalid.status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(invalid.what(), HasSubstr("Gloo refused the call: Invalid timeout"));

  const sdk::Error io = Translated([] { throw ::gloo::IoException("Connection closed by peer"); });
  EXPECT_EQ(io.status(), CHORUS_PEER_LOST);

  const sdk::Error own = Translated([] { throw sdk::Error(CHORUS_TIMEOUT, "rendezvous: late"); });
  EXPECT_EQ(own.status(), CHORUS_TIMEOUT);
  EXPECT_STREQ(own.what(), "gloo op: rendezvous: late");

  EXPECT_EQ(Translated([] { throw std::bad_alloc(); }).status(), CHORUS_OUT_OF_MEMORY);
  EXPECT_EQ(Translated([] { throw 42; }).status(), CHORUS_INTERNAL);
}

}  // namespace
}  // namespace chorus::gloo_plugin
