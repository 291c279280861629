// The TCP store's wire format. Every message is a frame: a 4-byte big-endian body length, then
// the body. A request body is
//   op (1 byte) | key count (u32) | keys (u32 length + bytes each) | value (u32 length + bytes)
//   | number (i64: SET/ADD's delta, GET/WAIT's time-out in ms)
// (one layout for every op, so one encoder; unused fields are empty or 0). A response body is
//   status (u32, a chorus_status) | payload (u32 length + bytes)
// where the payload is GET's value, ADD's new value (8 bytes), CHECK/REMOVE's answer (1 byte),
// or the message of a failed status. Every request but BYE gets exactly one response, in order.
//
// Admission: on every new connection the server speaks first, with a greeting (a response frame
// whose payload is kGreetingMagic, a flag byte, and a challenge). With the flag set the job has a
// secret, and the client's first request must be AUTH, which proves it holds the secret; the
// server answers with its own proof, so the client knows it reached its job's store and not a
// program that took the port. Until then the server reads at most kMaxAdmissionBodyBytes.
#ifndef CHORUS_TCP_STORE_PROTOCOL_H_
#define CHORUS_TCP_STORE_PROTOCOL_H_

#include <chorus/plugin.h>
#include <chorus/rendezvous/kv_store.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::tcp_store {

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,   // waits server-side up to `number` ms
  kWait = 3,  // waits server-side up to `number` ms for every key
  kAdd = 4,   // adds `number`
  kCheck = 5,
  kRemove = 6,
  kHello = 7,  // keys[0] names this client for the lost-peer record
  kBye = 8,    // a clean goodbye; no response
  // keys[0]: the client's challenge, value: its proof; the answer's payload is the server's
  // proof. Only as the first request, when the greeting asks for it.
  kAuth = 9,
  // This connection is its client's heartbeat (every request on it counts as one); answers a
  // HealthReport (EncodeHealthReport). See job_health.h.
  kHealth = 32,
};

inline constexpr std::string_view kGreetingMagic = "chorus-rendezvous/1";
// The proofs' roles (JobSecret::Prove), one per side.
inline constexpr std::string_view kClientRole = "chorus rendezvous client";
inline constexpr std::string_view kServerRole = "chorus rendezvous server";

struct Greeting {
  bool secret_required = false;
  std::string challenge;  // JobSecret::kChallengeBytes when secret_required, else empty
};

Bytes EncodeGreeting(const Greeting& greeting);
// nullopt when the frame is not a chorus greeting (another program answered).
std::optional<Greeting> DecodeGreeting(const uint8_t* body, size_t size);

constexpr size_t kFrameHeaderBytes = 4;
// Larger frames are refused, so a corrupt length cannot make the peer allocate gigabytes: a
// value of up to 64 MiB (chorus_kv_store's limit) with its keys.
constexpr uint32_t kMaxFrameBodyBytes = 65u << 20;
// What the server reads from a connection before it is admitted (the AUTH request), and the
// longest greeting a client reads.
constexpr uint32_t kMaxAdmissionBodyBytes = 256;

// The key the server sets to "1" when a client that said HELLO(name) disconnects without BYE,
// and the comma list of every such name.
inline std::string LostKey(const std::string& name) { return "chorus/lost/" + name; }
inline constexpr const char* kLostListKey = "chorus/lost";

struct Request {
  Op op = Op::kSet;
  std::vector<std::string> keys;
  Bytes value;
  int64_t number = 0;
};

struct Response {
  chorus_status status = CHORUS_OK;
  Bytes payload;
};

// What kHealth answers: every client with a heartbeat connection open now and how long the server
// has not heard from it, measured by the server's own steady clock when it answers, and the names
// recorded as lost (LostKey), in the order they were lost.
struct MemberSilence {
  std::string name;
  int64_t silent_ms = 0;  // the least of its heartbeat connections'
};
struct HealthReport {
  std::vector<MemberSilence> members;
  std::vector<std::string> lost;
};

// Whole frames, header included.
Bytes EncodeRequest(const Request& request);
Bytes EncodeResponse(const Response& response);

// Decode a frame's body. Throw Error(CHORUS_INTERNAL) on a malformed body.
Request DecodeRequest(const uint8_t* body, size_t size);
Response DecodeResponse(const uint8_t* body, size_t size);

// The body length in a frame header. Throws Error(CHORUS_INTERNAL) above kMaxFrameBodyBytes.
uint32_t DecodeFrameLength(const uint8_t header[kFrameHeaderBytes]);

// kHealth's payload (no frame header). Decode throws Error(CHORUS_INTERNAL) when malformed.
Bytes EncodeHealthReport(const HealthReport& report);
HealthReport DecodeHealthReport(const Bytes& payload);

// ADD's payload.
Bytes EncodeInt64(int64_t value);
int64_t DecodeInt64(const Bytes& payload);

}  // namespace chorus::tcp_store

#endif  // CHORUS_TCP_STORE_PROTOCOL_H_
