// JobCredential: a job-secret token for listeners that cannot run the core's challenge.
#include <chorus/rendezvous/job_credential.h>

#include "base/job_secret.h"

namespace chorus {
namespace {

std::string Hex(const Digest256& digest) {
  static const char* const kDigits = "0123456789abcdef";
  std::string hex;
  for (uint8_t byte : digest) {
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 15];
  }
  return hex;
}

}  // namespace

JobCredential JobCredentialFor(std::string_view purpose, const std::string& listener) {
  const JobSecret secret = JobSecret::FromEnvironment();
  JobCredential credential;
  if (!secret.present()) {
    if (!listener.empty()) JobSecret::WarnOpenOnce(listener);
    return credential;
  }
  credential.required = true;
  credential.token = Hex(secret.Prove("job credential", {purpose}));
  credential.source = secret.source();
  return credential;
}

bool AcceptsJobCredential(const JobCredential& mine, std::string_view presented) {
  if (!mine.required) return true;
  if (presented.size() != mine.token.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < presented.size(); ++i) {
    difference |= static_cast<unsigned char>(presented[i] ^ mine.token[i]);
  }
  return difference == 0;
}

std::string JobSecretHint() { return kJobSecretHint; }

}  // namespace chorus
