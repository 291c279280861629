// Binomial-tree broadcast: in root-relative ranks v, the parent of v is v without its lowest set
// bit and its children are v + m for every power of two m below that bit (below p for the root),
// largest subtree first. ceil(log2 p) rounds of latency; the buffer goes in segments
// (option segment_bytes, default 1 MiB), and a rank forwards segment s while it receives s + 1,
// so a large broadcast streams down the tree instead of waiting for whole copies at each level.
#include <algorithm>
#include <chorus/algorithm_sdk.hpp>
#include <memory>

#include "run_context.h"

namespace chorus::algorithms {

void RunBinomialBroadcast(RunContext& run, size_t segment_bytes) {
  const int n = run.size();
  const auto& a = run.args();
  if (n == 1 || a.count == 0) return;
  const int v = (run.rank() - a.root + n) % n;
  const auto real = [&](int relative) { return (relative + a.root) % n; };
  const int low_bit = v == 0 ? n : (v & -v);
  std::vector<int> children;
  for (int m = 1; m < low_bit && v + m < n; m *= 2) children.push_back(real(v + m));
  std::reverse(children.begin(), children.end());  // the largest subtree first

  const size_t es = run.element_bytes();
  const size_t segment = std::max<size_t>(1, segment_bytes / es);
  const size_t segments = (a.count + segment - 1) / segment;
  uint8_t* data = run.recv();
  const uint64_t tag = run.Tag(1);  // one (pair, tag): segments arrive in the order sent
  const auto bytes_of = [&](size_t s) { return std::min(segment, a.count - s * segment) * es; };

  std::unique_ptr<sdk::P2pRequests> receive;
  const auto post_receive = [&](size_t s) {
    receive = std::make_unique<sdk::P2pRequests>(run.p2p(), run.name(), a.timeout_ms);
    receive->Receive(real(v - (v & -v)), tag, data + s * segment * es, bytes_of(s));
  };
  if (v != 0) post_receive(0);
  sdk::P2pRequests sends(run.p2p(), run.name(), a.timeout_ms);
  for (size_t s = 0; s < segments; ++s) {
    if (v != 0) {
      receive->WaitAll();
      if (s + 1 < segments) post_receive(s + 1);
    }
    for (int child : children) sends.Send(child, tag, data + s * segment * es, bytes_of(s));
    if (sends.live() >= 4 * std::max<size_t>(1, children.size())) sends.WaitAll();
  }
  sends.WaitAll();
}

}  // namespace chorus::algorithms
