// The options a gloo communicator accepts at create.
#ifndef CHORUS_PLUGINS_GLOO_OPTIONS_H_
#define CHORUS_PLUGINS_GLOO_OPTIONS_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <string>

namespace chorus::gloo_plugin {

// The all-reduce algorithm; reduce_scatter runs as an all-reduce with it.
enum class Algorithm {
  kRing,         // gloo::allreduce(), AllreduceOptions::Algorithm::RING
  kRingChunked,  // gloo::AllreduceRingChunked<T>
  kBcube,        // gloo::allreduce(), AllreduceOptions::Algorithm::BCUBE
};

const char* AlgorithmName(Algorithm algorithm);

struct CommunicatorOptions {
  // ring, as torch.distributed's Gloo backend runs all-reduce: ring_chunked (a class built per
  // call, registering its buffers with every peer) stalled 48 ms at 16 KiB and was slower at
  // every size (plugins/gloo/README.md, "Why ring is the default").
  Algorithm algorithm = Algorithm::kRing;
  // Where this rank listens (gloo::transport::tcp::attr): an address or host name to bind, or a
  // network interface whose address to use. One of them; 127.0.0.1 when neither is given.
  std::string hostname;
  std::string interface;
};

// Options: algorithm = ring | ring_chunked | bcube; hostname = <address or name>;
// interface = <name, e.g. eth0>; transport = tcp | ibverbs. An unknown key, a key given twice, an
// empty or unknown value, or both hostname and interface is CHORUS_INVALID_ARGUMENT naming it and
// what is valid. transport=ibverbs is CHORUS_UNSUPPORTED, saying why.
CommunicatorOptions ParseOptions(const chorus_option* options, size_t count);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_OPTIONS_H_
