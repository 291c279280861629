#include "p2p_measure.h"

#include <chorus/base/error.h>

#include <chrono>
#include <cstring>
#include <string>

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

void MeasureStream(TransportEndpoint& endpoint, const P2pSettings& settings, P2pBuffers& buffers,
                   uint64_t stamp, P2pSamples& samples) {
  const int rank = endpoint.rank();
  if (rank > 1) return;
  const uint64_t bytes = buffers.bytes;
  const auto window = static_cast<size_t>(buffers.window);
  const int total = settings.warmup_iters + settings.iters;
  uint64_t ack = 0;
  for (int it = 0; it < total; ++it) {
    // Checked: the first message of the first window and the last one of the last window. Every
    // message of a window is sent from the one buffer, so a window carries one stamp.
    const bool first = it == 0, last = it == total - 1;
    const uint64_t first_stamp = stamp, last_stamp = stamp + (total > 1 ? 1 : 0);
    std::vector<P2pOperation> operations;
    operations.reserve(window);
    if (rank == 0) {
      if (first) FillPattern(buffers.send.data(), bytes, first_stamp);
      if (last && total > 1) FillPattern(buffers.send.data(), bytes, last_stamp);
      P2pOperation ack_receive(endpoint);
      ack_receive.Start(false, 1, kAckTag, &ack, sizeof ack);
      const auto start = Clock::now();
      for (size_t k = 0; k < window; ++k) {
        operations.emplace_back(endpoint);
        operations.back().Start(true, 1, kStreamTag, buffers.send.data(), bytes);
      }
      for (auto& send : operations) send.Wait(settings.timeout_ms, bytes);
      ack_receive.Wait(settings.timeout_ms, sizeof ack);
      const double window_us = MicrosecondsSince(start);
      if (it >= settings.warmup_iters) samples.window_us.push_back(window_us);
    } else {
      uint8_t* received = buffers.receive.data();
      if (first || last) MarkUnwritten(received, bytes);
      for (size_t k = 0; k < window; ++k) {
        operations.emplace_back(endpoint);
        operations.back().Start(false, 0, kStreamTag, received, bytes);
      }
      for (auto& receive : operations) receive.Wait(settings.timeout_ms, bytes);
      Send(endpoint, 0, kAckTag, &ack, sizeof ack, settings.timeout_ms);
      // Every message of the window wrote the window's bytes here: checked after the window.
      if (first) samples.wrong += CountWrongBytes(received, bytes, first_stamp);
      if (last && total > 1) samples.wrong += CountWrongBytes(received, bytes, last_stamp);
    }
  }
}

}  // namespace chorus::bench
