// SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), for the job secret's challenge-response. Small
// and self-contained, so the core needs no crypto library; checked against RFC 4231's vectors.
#ifndef CHORUS_BASE_HMAC_SHA256_H_
#define CHORUS_BASE_HMAC_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace chorus {

using Digest256 = std::array<uint8_t, 32>;

Digest256 Sha256(const void* data, size_t size);

// HMAC-SHA256 of the concatenation of `parts` under `key`.
Digest256 HmacSha256(std::string_view key, std::initializer_list<std::string_view> parts);

// Compares in time independent of where the inputs differ, so a proof cannot be guessed byte by
// byte from response times.
bool ConstantTimeEqual(const void* a, const void* b, size_t size);

// `size` bytes from the kernel's random source (getrandom). Throws Error(INTERNAL) if it fails.
void RandomBytes(void* out, size_t size);

// 2 x `bytes` lowercase hex digits of RandomBytes: a job's or an object's id.
std::string RandomHex(size_t bytes);

}  // namespace chorus

#endif  // CHORUS_BASE_HMAC_SHA256_H_
