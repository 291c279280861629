// --stream-bandwidth: the host's streaming bandwidth, the ceiling of any in-process reduce.
#ifndef CHORUS_TOOLS_BENCH_STREAM_BANDWIDTH_H_
#define CHORUS_TOOLS_BENCH_STREAM_BANDWIDTH_H_

#include <cstdint>

namespace chorus::bench {

struct StreamBandwidth {
  uint64_t array_bytes = 0;
  double time_us = 0;  // median time of one pass
  double gbps = 0;     // 3 x array_bytes per pass (read a, read b, write a) / time
};

// a[i] += b[i] over two f32 arrays of `array_bytes` each, on one thread, `passes` times.
StreamBandwidth MeasureStreamBandwidth(uint64_t array_bytes, int passes);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_STREAM_BANDWIDTH_H_
