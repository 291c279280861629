#include "rendezvous/tcp_store_protocol.h"

#include <chorus/base/error.h>

#include <algorithm>
#include <cstring>

namespace chorus::tcp_store {
namespace {

[[noreturn]] void Malformed(const std::string& what) {
  throw Error(CHORUS_INTERNAL, "rendezvous: malformed tcp store message: " + what);
}

class Writer {
 public:
  Writer() { out_.resize(kFrameHeaderBytes); }
  // The body only, for a payload nested in a response (Body() instead of Finish()).
  struct Unframed {};
  explicit Writer(Unframed) {}
  void U8(uint8_t v) { out_.push_back(v); }
  void U64(uint64_t v) {
    for (int shift = 56; shift >= 0; shift -= 8) out_.push_back(static_cast<uint8_t>(v >> shift));
  }
  void U32(uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out_.push_back(static_cast<uint8_t>(v >> shift));
  }
  void Blob(const void* data, size_t size) {
    if (size > kMaxFrameBodyBytes) Malformed("a field of " + std::to_string(size) + " bytes");
    U32(static_cast<uint32_t>(size));
    const auto* bytes = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), bytes, bytes + size);
  }
  // Fills in the header and returns the frame.
  Bytes Finish() {
    const size_t body = out_.size() - kFrameHeaderBytes;
    if (body > kMaxFrameBodyBytes) Malformed("a message of " + std::to_string(body) + " bytes");
    for (size_t i = 0; i < kFrameHeaderBytes; ++i) {
      out_[i] = static_cast<uint8_t>(body >> (8 * (kFrameHeaderBytes - 1 - i)));
    }
    return std::move(out_);
  }
  Bytes Body() { return std::move(out_); }

 private:
  Bytes out_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), left_(size) {}
  uint8_t U8() { return Take(1)[0]; }
  uint32_t U32() {
    const uint8_t* p = Take(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
    return v;
  }
  uint64_t U64() {
    const uint8_t* p = Take(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
  }
  Bytes Blob() {
    const uint32_t size = U32();
    const uint8_t* p = Take(size);
    return Bytes(p, p + size);
  }
  std::string String() {
    const uint32_t size = U32();
    const uint8_t* p = Take(size);
    return std::string(reinterpret_cast<const char*>(p), size);
  }
  void ExpectEnd() const {
    if (left_ != 0) Malformed(std::to_string(left_) + " trailing bytes");
  }

 private:
  const uint8_t* Take(size_t n) {
    if (n > left_) Malformed("truncated");
    const uint8_t* p = data_;
    data_ += n;
    left_ -= n;
    return p;
  }
  const uint8_t* data_;
  size_t left_;
};

}  // namespace

Bytes EncodeRequest(const Request& request) {
  Writer w;
  w.U8(static_cast<uint8_t>(request.op));
  w.U32(static_cast<uint32_t>(request.keys.size()));
  for (const std::string& key : request.keys) w.Blob(key.data(), key.size());
  w.Blob(request.value.data(), request.value.size());
  w.U64(static_cast<uint64_t>(request.number));
  return w.Finish();
}

Bytes EncodeResponse(const Response& response) {
  Writer w;
  w.U32(static_cast<uint32_t>(response.status));
  w.Blob(response.payload.data(), response.payload.size());
  return w.Finish();
}

Request DecodeRequest(const uint8_t* body, size_t size) {
  Reader r(body, size);
  Request request;
  const uint8_t op = r.U8();
  if ((op < static_cast<uint8_t>(Op::kSet) || op > static_cast<uint8_t>(Op::kAuth)) &&
      op != static_cast<uint8_t>(Op::kHealth)) {
    Malformed("unknown operation " + std::to_string(op));
  }
  request.op = static_cast<Op>(op);
  const uint32_t count = r.U32();
  // Each key takes at least 4 bytes, so a count beyond the body is corrupt (and must not be
  // reserved).
  if (count > size / 4) Malformed("a key count of " + std::to_string(count));
  request.keys.reserve(count);
  for (uint32_t i = 0; i < count; ++i) request.keys.push_back(r.String());
  request.value = r.Blob();
  request.number = static_cast<int64_t>(r.U64());
  r.ExpectEnd();
  return request;
}

Response DecodeResponse(const uint8_t* body, size_t size) {
  Reader r(body, size);
  Response response;
  response.status = static_cast<chorus_status>(r.U32());
  response.payload = r.Blob();
  r.ExpectEnd();
  return response;
}

uint32_t DecodeFrameLength(const uint8_t header[kFrameHeaderBytes]) {
  uint32_t length = 0;
  for (size_t i = 0; i < kFrameHeaderBytes; ++i) length = (length << 8) | header[i];
  if (length > kMaxFrameBodyBytes) Malformed("a frame of " + std::to_string(length) + " bytes");
  return length;
}

Bytes EncodeGreeting(const Greeting& greeting) {
  Bytes payload(kGreetingMagic.begin(), kGreetingMagic.end());
  payload.push_back(greeting.secret_required ? 1 : 0);
  payload.insert(payload.end(), greeting.challenge.begin(), greeting.challenge.end());
  return EncodeResponse({CHORUS_OK, payload});
}

std::optional<Greeting> DecodeGreeting(const uint8_t* body, size_t size) {
  Response response;
  try {
    response = DecodeResponse(body, size);
  } catch (const Error&) {
    return std::nullopt;
  }
  const Bytes& payload = response.payload;
  if (response.status != CHORUS_OK || payload.size() < kGreetingMagic.size() + 1 ||
      !std::equal(kGreetingMagic.begin(), kGreetingMagic.end(), payload.begin())) {
    return std::nullopt;
  }
  Greeting greeting;
  greeting.secret_required = payload[kGreetingMagic.size()] != 0;
  greeting.challenge.assign(
      payload.begin() + static_cast<std::ptrdiff_t>(kGreetingMagic.size() + 1), payload.end());
  return greeting;
}

Bytes EncodeHealthReport(const HealthReport& report) {
  Writer w{Writer::Unframed{}};
  w.U32(static_cast<uint32_t>(report.members.size()));
  for (const MemberSilence& member : report.members) {
    w.Blob(member.name.data(), member.name.size());
    w.U64(static_cast<uint64_t>(member.silent_ms));
  }
  w.U32(static_cast<uint32_t>(report.lost.size()));
  for (const std::string& name : report.lost) w.Blob(name.data(), name.size());
  return w.Body();
}

HealthReport DecodeHealthReport(const Bytes& payload) {
  Reader r(payload.data(), payload.size());
  HealthReport report;
  // Each entry takes at least 4 bytes, so a count beyond the payload is corrupt.
  const uint32_t members = r.U32();
  if (members > payload.size() / 4) Malformed("a member count of " + std::to_string(members));
  for (uint32_t i = 0; i < members; ++i) {
    MemberSilence member;
    member.name = r.String();
    member.silent_ms = static_cast<int64_t>(r.U64());
    report.members.push_back(std::move(member));
  }
  const uint32_t lost = r.U32();
  if (lost > payload.size() / 4) Malformed("a lost count of " + std::to_string(lost));
  for (uint32_t i = 0; i < lost; ++i) report.lost.push_back(r.String());
  r.ExpectEnd();
  return report;
}

Bytes EncodeInt64(int64_t value) {
  Bytes out(8);
  const auto v = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  return out;
}

int64_t DecodeInt64(const Bytes& payload) {
  if (payload.size() != 8) Malformed("an integer of " + std::to_string(payload.size()) + " bytes");
  uint64_t v = 0;
  for (uint8_t b : payload) v = (v << 8) | b;
  return static_cast<int64_t>(v);
}

}  // namespace chorus::tcp_store
