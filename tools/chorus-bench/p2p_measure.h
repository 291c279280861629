// Point-to-point figures of one transport endpoint between ranks 0 and 1, as ucx_perftest's
// tag_lat and tag_bw measure them:
//   ping-pong: rank 0 sends `bytes`, rank 1 receives them and sends them back; the time of one
//     round trip, halved, is one latency sample (ucx_perftest's and fi_pingpong's latency).
//   stream: rank 0 sends warmup_iters x window messages, then iters x window, keeping up to
//     `window` sends in flight (it waits for the oldest before it posts the next), rank 1 posts
//     one receive at a time; each of the two streams ends with an 8-byte ack from rank 1. The
//     time of the second from rank 0's first send to the ack is one sample (tag_bw's "overall").
// Only rank 0 times. The first and the last message of each run carry a pattern of their own
// that the receiving rank checks byte by byte after the run (the echo too); wrong bytes are
// counted, not thrown. A failure of the transport (a lost peer, a time-out) throws chorus::Error.
#ifndef CHORUS_TOOLS_BENCH_P2P_MEASURE_H_
#define CHORUS_TOOLS_BENCH_P2P_MEASURE_H_

#include <chorus/collective/transport_endpoint.h>

#include <cstdint>
#include <vector>

namespace chorus::bench {

struct P2pSettings {
  int warmup_iters = 5;  // untimed ping-pongs / windows of messages first
  int iters = 20;        // timed ones
  int64_t timeout_ms = 120000;
};

// What this rank measured (times: rank 0 only) and the wrong bytes it received.
struct P2pSamples {
  std::vector<double> half_round_trip_us;
  std::vector<double> stream_us;  // one per timed stream of iters x window messages
  uint64_t wrong = 0;
};

// Buffers of one size, kept across transports and repeats of that size.
struct P2pBuffers {
  P2pBuffers(uint64_t bytes, int window);
  uint64_t bytes;
  int window;                       // messages in flight in the bandwidth test
  std::vector<uint8_t> send, echo;  // rank 0: what it sends, and the echo it receives
  // The receiver's: every message of a stream lands here (the first in `echo`), as
  // ucx_perftest's tag_bw and fi_pingpong receive theirs. A buffer per message (16 of 4 MiB were
  // past the last-level cache) measured the memory's write bandwidth more than the transport:
  // 4 MiB over UCX's shared memory ran 15-20% slower that way.
  std::vector<uint8_t> receive;
};

// `stamp` makes the checked messages of this run differ from every other run's (each run takes
// the stamps stamp and stamp + 1). Every rank other than 0 and 1 returns at once.
void MeasurePingPong(TransportEndpoint& endpoint, const P2pSettings& settings, P2pBuffers& buffers,
                     uint64_t stamp, P2pSamples& samples);
void MeasureStream(TransportEndpoint& endpoint, const P2pSettings& settings, P2pBuffers& buffers,
                   uint64_t stamp, P2pSamples& samples);

// The checked messages' contents: never 0xff, which marks a byte nobody wrote.
void FillPattern(uint8_t* data, uint64_t bytes, uint64_t stamp);
uint64_t CountWrongBytes(const uint8_t* data, uint64_t bytes, uint64_t stamp);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_P2P_MEASURE_H_
