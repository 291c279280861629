// The job's secret: what admits a process to the listeners of one job (the rendezvous store, the
// tcp transport, the plugins' own listeners through the host services). Members prove they hold
// it by answering a random challenge with HMAC-SHA256(secret, role | challenge); the secret itself
// never travels. The roles keep one side's proof from being replayed as the other's.
#ifndef CHORUS_BASE_JOB_SECRET_H_
#define CHORUS_BASE_JOB_SECRET_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "base/hmac_sha256.h"

namespace chorus {

class JobSecret {
 public:
  // The fewest bytes a secret may have: shorter ones can be guessed.
  static constexpr size_t kMinBytes = 16;
  static constexpr size_t kChallengeBytes = 32;
  static constexpr size_t kProofBytes = 32;

  // From CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE (the file's content, trailing newlines
  // dropped), read at each call, so a test may change them. Neither set: no secret. Throws
  // Error(INVALID_ARGUMENT) for both set, a short secret, or a file that cannot be read or that
  // other users can read.
  static JobSecret FromEnvironment();

  JobSecret() = default;  // none
  JobSecret(std::string key, std::string source) : key_(std::move(key)), source_(source) {}

  bool present() const { return !key_.empty(); }
  // Where it came from, for messages: "CHORUS_JOB_SECRET", "CHORUS_JOB_SECRET_FILE=/path".
  const std::string& source() const { return source_; }

  // HMAC-SHA256(secret, role | parts...). Only meaningful when present().
  Digest256 Prove(std::string_view role, std::initializer_list<std::string_view> parts) const;
  // Whether `proof` (kProofBytes) is Prove(role, parts), compared in constant time.
  bool Verify(const void* proof, std::string_view role,
              std::initializer_list<std::string_view> parts) const;

  // A fresh random challenge.
  static std::string Challenge();

  // Logs once per process that `listener` admits any process that can reach it.
  static void WarnOpenOnce(const std::string& listener);

 private:
  std::string key_;
  std::string source_;
};

// The fix for a process that lacks the secret its peers use, for messages.
inline constexpr const char* kJobSecretHint =
    "give every process of the job the same CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE "
    "(chorus-launch sets one for the workers it starts)";

}  // namespace chorus

#endif  // CHORUS_BASE_JOB_SECRET_H_
