// The collectives "algorithm@transport": the registry makes one of every algorithm (plugin.h
// interface 4) and every transport (interface 5) it has loaded, whichever plugins they come from,
// so a vendor's algorithm runs over any transport and a vendor's transport carries any algorithm
// without either plugin knowing the other. The core's ring over its tcp is not made again: that
// pair is core_ring, and "ring@tcp" names it.
//
// Each pair is a real chorus_collective_api (algorithm_collective.h), so everything that takes a
// collective (CHORUS_COMMUNICATION, CHORUS_ALGORITHM rules, the tuning file, AUTO's scores,
// chorus-bench --backends, the host's composition service, the conformance kit) takes a pair.
// The pair's table and capabilities carry the pair as their context (plugin.h 1.6), which the
// core hands back in the create and score args, so every pair shares one create and one score.
//
// Score (ABI 1.3): the algorithm's score x the transport's score / CHORUS_SCORE_MAX, both asked
// with the same chorus_score_args; 0 (chosen by name only) when either declares no capabilities.
// The pair's ops are the algorithm's; shape is the stricter of the two (a transport that reaches
// one host only makes the pair ONE_HOST).
#ifndef CHORUS_CORE_ALGORITHM_PAIRS_H_
#define CHORUS_CORE_ALGORITHM_PAIRS_H_

#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>

#include <memory>
#include <string>

#include "runtime/algorithm_collective.h"

namespace chorus::internal {

// The name of the pair: "<algorithm>@<transport>".
std::string PairName(const char* algorithm, const char* transport);

class AlgorithmPair {
 public:
  static std::unique_ptr<AlgorithmPair> Make(std::shared_ptr<PluginLibrary> algorithm_plugin,
                                             const chorus_algorithm_api& algorithm,
                                             std::shared_ptr<PluginLibrary> transport_plugin,
                                             const chorus_transport_api& transport);
  ~AlgorithmPair();
  AlgorithmPair(const AlgorithmPair&) = delete;
  AlgorithmPair& operator=(const AlgorithmPair&) = delete;

  const std::string& name() const { return what_.name; }
  const chorus_collective_api* table() const { return &table_; }
  const std::shared_ptr<PluginLibrary>& algorithm_plugin() const { return algorithm_plugin_; }
  const std::shared_ptr<PluginLibrary>& transport_plugin() const { return transport_plugin_; }

  chorus_status Create(const chorus_communicator_create_args* args,
                       chorus_communicator** out) const;
  uint32_t Score(const chorus_score_args& args) const;

 private:
  AlgorithmPair() = default;

  std::shared_ptr<PluginLibrary> algorithm_plugin_, transport_plugin_;
  AlgorithmOverTransport what_;
  const chorus_capabilities* algorithm_capabilities_ = nullptr;
  chorus_capabilities transport_capabilities_{};  // ops widened: a transport's ops are ignored
  chorus_capabilities capabilities_{};
  chorus_collective_api table_{};
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_ALGORITHM_PAIRS_H_
