#include "base/job_secret.h"

#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/logging.h"

namespace chorus {
namespace {

std::string ReadSecretFile(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_JOB_SECRET_FILE=" + path +
                                             " cannot be read: " + std::strerror(errno) +
                                             "; point it at the job's secret file");
  }
  if (!S_ISREG(info.st_mode)) {
    throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_JOB_SECRET_FILE=" + path +
                                             (S_ISDIR(info.st_mode) ? " is a directory, not a file"
                                                                    : " is not a regular file") +
                                             "; point it at the job's secret file");
  }
  // As ssh does with private keys: a secret other users can read protects nothing.
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_JOB_SECRET_FILE=" + path +
                                             " is open to other users (mode " + mode +
                                             "); run chmod 600 " + path);
  }
  std::ifstream file(path, std::ios::binary);
  std::ostringstream content;
  content << file.rdbuf();
  if (!file) {
    throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_JOB_SECRET_FILE=" + path + " cannot be read");
  }
  std::string secret = content.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  return secret;
}

}  // namespace

JobSecret JobSecret::FromEnvironment() {
  const std::optional<std::string> inline_secret = GetEnv("CHORUS_JOB_SECRET");
  const std::optional<std::string> file = GetEnv("CHORUS_JOB_SECRET_FILE");
  const bool has_inline = inline_secret && !inline_secret->empty();
  const bool has_file = file && !file->empty();
  if (has_inline && has_file) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "both CHORUS_JOB_SECRET and CHORUS_JOB_SECRET_FILE are set; set only one");
  }
  if (!has_inline && !has_file) return {};
  std::string key = has_inline ? *inline_secret : ReadSecretFile(*file);
  const std::string source = has_inline ? "CHORUS_JOB_SECRET" : "CHORUS_JOB_SECRET_FILE=" + *file;
  if (key.size() < kMinBytes) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "the job secret from " + source + " has " + std::to_string(key.size()) +
                    " bytes; use at least " + std::to_string(kMinBytes) +
                    " random ones (e.g. the output of: head -c 32 /dev/urandom | xxd -p -c 64)");
  }
  return JobSecret(std::move(key), source);
}

Digest256 JobSecret::Prove(std::string_view role,
                           std::initializer_list<std::string_view> parts) const {
  std::vector<std::string_view> all{role};
  all.insert(all.end(), parts.begin(), parts.end());
  std::string message;
  for (std::string_view part : all) {
    // Length-prefixed, so ("ab", "c") and ("a", "bc") prove different things.
    const auto size = static_cast<uint32_t>(part.size());
    for (int shift = 24; shift >= 0; shift -= 8)
      message.push_back(static_cast<char>(size >> shift));
    message.append(part);
  }
  return HmacSha256(key_, {message});
}

bool JobSecret::Verify(const void* proof, std::string_view role,
                       std::initializer_list<std::string_view> parts) const {
  const Digest256 expected = Prove(role, parts);
  return present() && ConstantTimeEqual(proof, expected.data(), expected.size());
}

std::string JobSecret::Challenge() {
  std::string challenge(kChallengeBytes, '\0');
  RandomBytes(challenge.data(), challenge.size());
  return challenge;
}

void JobSecret::WarnOpenOnce(const std::string& listener) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  Log().warn(
      "rendezvous: no job secret (CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE), so {} admits any "
      "process that can reach it; chorus-launch sets a secret for the jobs it starts",
      listener);
}

}  // namespace chorus
