#include "p2p_measure.h"

#include <chorus/base/error.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::bench {

namespace {

using Clock = std::chrono::steady_clock;

// One tag per direction and phase: messages of one tag between a pair arrive in order.
constexpr uint64_t kPingTag = 1;
constexpr uint64_t kPongTag = 2;
constexpr uint64_t kStreamTag = 3;
constexpr uint64_t kAckTag = 4;
constexpr uint8_t kUnwritten = 0xff;

// Fills a receive buffer with bytes no pattern has, so a message that writes nothing is caught.
void MarkUnwritten(uint8_t* data, uint64_t bytes) {
  if (bytes > 0) std::memset(data, kUnwritten, bytes);  // an empty buffer's data() may be null
}

double MicrosecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// One operation through the endpoint's p2p (the path algorithm@transport collectives take).
// Destroyed before it completed (an exception on the way), it aborts the endpoint first, after
// which an unfinished request may be freed.
class P2pOperation {
 public:
  explicit P2pOperation(TransportEndpoint& endpoint) : endpoint_(&endpoint) {}
  P2pOperation(P2pOperation&& other) noexcept
      : endpoint_(other.endpoint_), request_(other.request_) {
    other.request_ = nullptr;
  }
  P2pOperation(const P2pOperation&) = delete;
  P2pOperation& operator=(const P2pOperation&) = delete;
  P2pOperation& operator=(P2pOperation&&) = delete;
  ~P2pOperation() {
    if (request_ == nullptr) return;
    endpoint_->Abort();
    Release();
  }

  void Start(bool send, int peer, uint64_t tag, void* data, uint64_t bytes) {
    chorus_p2p_args args{};
    args.struct_size = sizeof(args);
    args.peer = peer;
    args.tag = tag;
    args.data = data;
    args.bytes = bytes;
    const chorus_p2p* p2p = endpoint_->p2p();
    const chorus_status status =
        send ? p2p->isend(p2p->ctx, &args, &request_) : p2p->irecv(p2p->ctx, &args, &request_);
    if (status != CHORUS_OK) Fail(status, send ? "isend" : "irecv", bytes);
  }

  void Wait(int64_t timeout_ms, uint64_t bytes) {
    const chorus_p2p* p2p = endpoint_->p2p();
    const chorus_status status = p2p->wait(p2p->ctx, request_, timeout_ms);
    if (status != CHORUS_OK) Fail(status, "wait", bytes);
    Release();
  }

 private:
  void Release() {
    const chorus_p2p* p2p = endpoint_->p2p();
    p2p->free(p2p->ctx, request_);
    request_ = nullptr;
  }

  [[noreturn]] void Fail(chorus_status status, const char* what, uint64_t bytes) {
    throw Error(status, std::string("transport '") + endpoint_->api().name + "': " + what +
                            " of a " + std::to_string(bytes) +
                            "-byte message failed: " + endpoint_->failure_message());
  }

  TransportEndpoint* endpoint_;
  chorus_p2p_request* request_ = nullptr;
};

void Send(TransportEndpoint& endpoint, int peer, uint64_t tag, const void* data, uint64_t bytes,
          int64_t timeout_ms) {
  P2pOperation send(endpoint);
  // The transport only reads a send's buffer; chorus_p2p_args has one pointer for both ways.
  send.Start(true, peer, tag, const_cast<void*>(data), bytes);
  send.Wait(timeout_ms, bytes);
}

void Receive(TransportEndpoint& endpoint, int peer, uint64_t tag, void* data, uint64_t bytes,
             int64_t timeout_ms) {
  P2pOperation receive(endpoint);
  receive.Start(false, peer, tag, data, bytes);
  receive.Wait(timeout_ms, bytes);
}

}  // namespace

void FillPattern(uint8_t* data, uint64_t bytes, uint64_t stamp) {
  // Not periodic in 256, so a block landing at the wrong offset differs; at most 250.
  for (uint64_t i = 0; i < bytes; ++i) {
    data[i] = static_cast<uint8_t>((i * 31 + (i >> 8) * 7 + stamp * 13 + 1) % 251);
  }
}

uint64_t CountWrongBytes(const uint8_t* data, uint64_t bytes, uint64_t stamp) {
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < bytes; ++i) {
    wrong += data[i] != static_cast<uint8_t>((i * 31 + (i >> 8) * 7 + stamp * 13 + 1) % 251);
  }
  return wrong;
}

P2pBuffers::P2pBuffers(uint64_t message_bytes, int messages_in_flight)
    : bytes(message_bytes),
      window(messages_in_flight),
      send(message_bytes),
      echo(message_bytes),
      receive(message_bytes) {}

void MeasurePingPong(TransportEndpoint& endpoint, const P2pSettings& settings, P2pBuffers& buffers,
                     uint64_t stamp, P2pSamples& samples) {
  const int rank = endpoint.rank();
  if (rank > 1) return;
  const uint64_t bytes = buffers.bytes;
  const int total = settings.warmup_iters + settings.iters;
  for (int it = 0; it < total; ++it) {
    // The first and the last ping-pong carry a pattern of their own; the receivers clear first.
    const bool checked = it == 0 || it == total - 1;
    const uint64_t message_stamp = stamp + (it == 0 ? 0 : 1);
    if (rank == 0) {
      if (checked) {
        FillPattern(buffers.send.data(), bytes, message_stamp);
        MarkUnwritten(buffers.echo.data(), bytes);
      }
      P2pOperation pong(endpoint);
      pong.Start(false, 1, kPongTag, buffers.echo.data(), bytes);
      const auto start = Clock::now();
      Send(endpoint, 1, kPingTag, buffers.send.data(), bytes, settings.timeout_ms);
      pong.Wait(settings.timeout_ms, bytes);
      const double round_trip_us = MicrosecondsSince(start);
      if (it >= settings.warmup_iters) samples.half_round_trip_us.push_back(round_trip_us / 2);
      if (checked) samples.wrong += CountWrongBytes(buffers.echo.data(), bytes, message_stamp);
    } else {
      uint8_t* received = buffers.receive.data();
      if (checked) MarkUnwritten(received, bytes);
      Receive(endpoint, 0, kPingTag, received, bytes, settings.timeout_ms);
      Send(endpoint, 0, kPongTag, received, bytes, settings.timeout_ms);  // the same bytes back
      if (checked) samples.wrong += CountWrongBytes(received, bytes, message_stamp);
    }
  }
}

namespace {

// One stream of `messages` messages from rank 0 to rank 1 as ucx_perftest's tag_bw runs it:
// rank 0 keeps up to `window` sends in flight (it waits for the oldest before it posts another),
// rank 1 posts one receive at a time; at the end rank 1 sends an 8-byte ack. Returns rank 0's
// time from its first send to the ack. Message 0 goes from `send` into rank 1's `echo` when
// `first_to_echo`; the message `last_from_echo` (if any) goes from rank 0's `echo`; every other
// message from `send` into `receive`.
double RunStream(TransportEndpoint& endpoint, const P2pSettings& settings, P2pBuffers& buffers,
                 uint64_t messages, bool first_to_echo, uint64_t last_from_echo) {
  const uint64_t bytes = buffers.bytes;
  uint64_t ack = 0;
  if (endpoint.rank() == 0) {
    const auto window = static_cast<size_t>(buffers.window);
    std::vector<P2pOperation> in_flight;  // a ring: message m uses slot m % window
    in_flight.reserve(window);
    P2pOperation ack_receive(endpoint);
    ack_receive.Start(false, 1, kAckTag, &ack, sizeof ack);
    const auto start = Clock::now();
    for (uint64_t m = 0; m < messages; ++m) {
      const size_t slot = m % window;
      if (slot == in_flight.size()) {
        in_flight.emplace_back(endpoint);
      } else {
        in_flight[slot].Wait(settings.timeout_ms, bytes);
      }
      uint8_t* data = m == last_from_echo ? buffers.echo.data() : buffers.send.data();
      in_flight[slot].Start(true, 1, kStreamTag, data, bytes);
    }
    // The oldest first, as they were posted.
    for (uint64_t m = messages > window ? messages - window : 0; m < messages; ++m) {
      in_flight[m % window].Wait(settings.timeout_ms, bytes);
    }
    ack_receive.Wait(settings.timeout_ms, sizeof ack);
    return MicrosecondsSince(start);
  }
  for (uint64_t m = 0; m < messages; ++m) {
    uint8_t* data = m == 0 && first_to_echo ? buffers.echo.data() : buffers.receive.data();
    Receive(endpoint, 0, kStreamTag, data, bytes, settings.timeout_ms);
  }
  Send(endpoint, 0, kAckTag, &ack, sizeof ack, settings.timeout_ms);
  return 0;
}

}  // namespace

void MeasureStream(TransportEndpoint& endpoint, const P2pSettings& settings, P2pBuffers& buffers,
                   uint64_t stamp, P2pSamples& samples) {
  const int rank = endpoint.rank();
  if (rank > 1) return;
  const uint64_t bytes = buffers.bytes;
  const auto window = static_cast<uint64_t>(buffers.window);
  const uint64_t warmup = static_cast<uint64_t>(settings.warmup_iters) * window;
  const uint64_t timed = static_cast<uint64_t>(settings.iters) * window;
  const uint64_t total = warmup + timed;
  if (total == 0) return;
  // Checked: the first message of the run (it lands in a buffer of its own) and the last one
  // (sent from a buffer of its own, so that no buffer changes under a send in flight).
  const uint64_t first_stamp = stamp, last_stamp = stamp + 1;
  const uint64_t last = total > 1 ? total - 1 : UINT64_MAX;
  if (rank == 0) {
    FillPattern(buffers.send.data(), bytes, first_stamp);
    if (total > 1) FillPattern(buffers.echo.data(), bytes, last_stamp);
  } else {
    MarkUnwritten(buffers.echo.data(), bytes);
    if (total > 1) MarkUnwritten(buffers.receive.data(), bytes);
  }
  // The warm-up stream ends with its own ack, as ucx_perftest's warm-up is a run of its own.
  if (warmup > 0) RunStream(endpoint, settings, buffers, warmup, true, last);
  if (timed > 0) {
    const double stream_us = RunStream(endpoint, settings, buffers, timed, warmup == 0,
                                       last == UINT64_MAX ? last : last - warmup);
    if (rank == 0) samples.stream_us.push_back(stream_us);
  }
  if (rank == 1) {
    samples.wrong += CountWrongBytes(buffers.echo.data(), bytes, first_stamp);
    if (total > 1) samples.wrong += CountWrongBytes(buffers.receive.data(), bytes, last_stamp);
  }
}

}  // namespace chorus::bench
