// SHA-256 and HMAC-SHA256 against FIPS 180-4's examples and RFC 4231's test cases, and the job
// secret's rules (CHORUS_JOB_SECRET, CHORUS_JOB_SECRET_FILE).
#include "base/hmac_sha256.h"

#include <chorus/base/error.h>
#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/job_secret.h"

namespace chorus {
namespace {

std::string Hex(const Digest256& digest) {
  std::string text;
  char byte[3];
  for (uint8_t b : digest) {
    std::snprintf(byte, sizeof byte, "%02x", b);
    text += byte;
  }
  return text;
}

TEST(Sha256Test, FipsExamples) {
  EXPECT_EQ(Hex(Sha256("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(Sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(Hex(Sha256(two_blocks.data(), two_blocks.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(Hex(Sha256(million.data(), million.size())),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256Test, Rfc4231) {
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\x0b'), {"Hi There"})),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hex(HmacSha256("Jefe", {"what do ya want ", "for nothing?"})),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\xaa'), {std::string(50, '\xdd')})),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // A key longer than the block is hashed first.
  EXPECT_EQ(Hex(HmacSha256(std::string(131, '\xaa'),
                           {"Test Using Larger Than Block-Size Key - Hash Key First"})),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(JobSecretTest, ProofsDependOnRoleSecretAndChallenge) {
  const JobSecret secret("0123456789abcdef", "test");
  const JobSecret other("fedcba9876543210", "test");
  const std::string challenge = JobSecret::Challenge();
  EXPECT_EQ(challenge.size(), JobSecret::kChallengeBytes);
  EXPECT_NE(challenge, JobSecret::Challenge());
  const Digest256 proof = secret.Prove("client", {challenge});
  EXPECT_TRUE(secret.Verify(proof.data(), "client", {challenge}));
  EXPECT_FALSE(secret.Verify(proof.data(), "server", {challenge}));
  EXPECT_FALSE(other.Verify(proof.data(), "client", {challenge}));
  EXPECT_FALSE(secret.Verify(proof.data(), "client", {JobSecret::Challenge()}));
  // Parts are length-prefixed: moving a byte from one to the next is another message.
  EXPECT_NE(secret.Prove("r", {"ab", "c"}), secret.Prove("r", {"a", "bc"}));
  EXPECT_FALSE(JobSecret().Verify(proof.data(), "client", {challenge}));
}

class JobSecretEnvironmentTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("CHORUS_JOB_SECRET");
    ::unsetenv("CHORUS_JOB_SECRET_FILE");
    std::filesystem::remove(path_);
  }
  std::string Write(const std::string& content, mode_t mode) {
    std::ofstream(path_) << content;
    ::chmod(path_.c_str(), mode);
    return path_;
  }
  static std::string ErrorOf(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  const std::string path_ =
      (std::filesystem::temp_directory_path() / ("chorus_secret_" + std::to_string(::getpid())))
          .string();
};

TEST_F(JobSecretEnvironmentTest, NoneMeansAnOpenJob) {
  ::unsetenv("CHORUS_JOB_SECRET");
  ::unsetenv("CHORUS_JOB_SECRET_FILE");
  EXPECT_FALSE(JobSecret::FromEnvironment().present());
}

TEST_F(JobSecretEnvironmentTest, FromTheVariableOrAPrivateFile) {
  ::setenv("CHORUS_JOB_SECRET", "0123456789abcdef", 1);
  EXPECT_TRUE(JobSecret::FromEnvironment().present());
  ::unsetenv("CHORUS_JOB_SECRET");
  ::setenv("CHORUS_JOB_SECRET_FILE", Write("0123456789abcdef\n", 0600).c_str(), 1);
  const JobSecret from_file = JobSecret::FromEnvironment();
  ASSERT_TRUE(from_file.present());
  // The trailing newline is not part of the secret.
  const JobSecret same("0123456789abcdef", "x");
  const Digest256 proof = same.Prove("r", {"c"});
  EXPECT_TRUE(from_file.Verify(proof.data(), "r", {"c"}));
}

TEST_F(JobSecretEnvironmentTest, BadSettingsAreNamed) {
  ::setenv("CHORUS_JOB_SECRET", "short", 1);
  EXPECT_NE(ErrorOf([] { JobSecret::FromEnvironment(); }).find("has 5 bytes; use at least 16"),
            std::string::npos);
  ::setenv("CHORUS_JOB_SECRET_FILE", Write("0123456789abcdef", 0600).c_str(), 1);
  EXPECT_NE(ErrorOf([] { JobSecret::FromEnvironment(); }).find("set only one"), std::string::npos);
  ::unsetenv("CHORUS_JOB_SECRET");
  Write("0123456789abcdef", 0644);
  EXPECT_NE(ErrorOf([] { JobSecret::FromEnvironment(); }).find("chmod 600"), std::string::npos);
  ::setenv("CHORUS_JOB_SECRET_FILE", "/nonexistent/secret", 1);
  EXPECT_NE(ErrorOf([] { JobSecret::FromEnvironment(); }).find("cannot be read"),
            std::string::npos);
}

// A directory (read as a stream, an empty file) is named as such.
TEST_F(JobSecretEnvironmentTest, ADirectoryIsNamed) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  ::setenv("CHORUS_JOB_SECRET_FILE", dir.c_str(), 1);
  EXPECT_NE(ErrorOf([] {
              JobSecret::FromEnvironment();
            }).find("CHORUS_JOB_SECRET_FILE=" + dir + " is a directory, not a file"),
            std::string::npos);
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

// The host service a plugin's own listener uses (ABI 1.2): the proof, never the secret.
TEST_F(JobSecretEnvironmentTest, TheHostProvesForAPluginWithoutHandingItTheSecret) {
  const chorus_host* host = CoreHost();
  ASSERT_TRUE(CHORUS_HAS_FIELD(host, chorus_host, prove_job_secret));
  uint8_t proof[32] = {};
  ::unsetenv("CHORUS_JOB_SECRET");
  EXPECT_EQ(host->job_secret_present(host->ctx), 0);
  EXPECT_EQ(host->prove_job_secret(host->ctx, "role", "challenge", 9, proof), CHORUS_UNAVAILABLE);
  ::setenv("CHORUS_JOB_SECRET", "0123456789abcdef", 1);
  EXPECT_EQ(host->job_secret_present(host->ctx), 1);
  ASSERT_EQ(host->prove_job_secret(host->ctx, "role", "challenge", 9, proof), CHORUS_OK);
  EXPECT_TRUE(JobSecret("0123456789abcdef", "x").Verify(proof, "role", {"challenge"}));
  EXPECT_EQ(host->prove_job_secret(host->ctx, nullptr, "challenge", 9, proof),
            CHORUS_INVALID_ARGUMENT);
}

// A secret that is set but cannot be used fails closed: the plugin is told there is one, and the
// proof it then asks for fails (a plugin must not run unauthenticated).
TEST_F(JobSecretEnvironmentTest, AnUnusableSecretFailsClosedForAPlugin) {
  const chorus_host* host = CoreHost();
  uint8_t proof[32] = {};
  ::setenv("CHORUS_JOB_SECRET", "too-short", 1);
  EXPECT_EQ(host->job_secret_present(host->ctx), 1);
  EXPECT_EQ(host->prove_job_secret(host->ctx, "role", "challenge", 9, proof),
            CHORUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace chorus
