// What a task shows to a listener of the job outside the core's own: the parameter-server RPCs,
// which gRPC carries one message at a time, with no room for the challenge the core's listeners
// send. The credential is HMAC-SHA256(job secret, purpose) in hex: it does not reveal the secret
// (CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE; chorus-launch sets one per job), but it is the
// same on every call, so it keeps out processes that lack the secret, not one that copies the
// token off the wire (those channels are plaintext anyway).
#ifndef CHORUS_RENDEZVOUS_JOB_CREDENTIAL_H_
#define CHORUS_RENDEZVOUS_JOB_CREDENTIAL_H_

#include <string>
#include <string_view>

namespace chorus {

struct JobCredential {
  bool required = false;  // the job has a secret: listeners admit only its holders
  std::string token;      // what this process presents; empty without a secret
  std::string source;     // where the secret came from, for messages
};

// This process's credential for `purpose`, from the environment. Throws Error(INVALID_ARGUMENT)
// for a secret the core's listeners would refuse (too short, both variables set, a file others
// can read). Without a secret and with a `listener` named (a server's), logs once that it admits
// any process that reaches it.
JobCredential JobCredentialFor(std::string_view purpose, const std::string& listener);
// Whether a caller that presented `presented` holds the secret (constant time); true when the
// job has none.
bool AcceptsJobCredential(const JobCredential& mine, std::string_view presented);
// The fix for a process that lacks the secret its peers use, for messages.
std::string JobSecretHint();

}  // namespace chorus

#endif  // CHORUS_RENDEZVOUS_JOB_CREDENTIAL_H_
