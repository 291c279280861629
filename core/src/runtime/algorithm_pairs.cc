#include "runtime/algorithm_pairs.h"

#include <chorus/plugin_sdk.hpp>
#include <utility>

#include "runtime/capability_score.h"

namespace chorus::internal {
namespace {

// The table's context (plugin.h 1.6) is its pair, handed back in the create and score args.
chorus_status PairCreate(const chorus_communicator_create_args* args, chorus_communicator** out) {
  if (args == nullptr || !CHORUS_HAS_FIELD(args, chorus_communicator_create_args, context) ||
      args->context == nullptr) {
    return sdk::SetError(CHORUS_INVALID_ARGUMENT,
                         "an algorithm@transport collective was created without its context");
  }
  return static_cast<const AlgorithmPair*>(args->context)->Create(args, out);
}

uint32_t PairScore(const chorus_score_args* args) {
  if (args == nullptr || !CHORUS_HAS_FIELD(args, chorus_score_args, context) ||
      args->context == nullptr) {
    return 0;
  }
  return static_cast<const AlgorithmPair*>(args->context)->Score(*args);
}

// The stricter of two job shapes: ONE_HOST over UNIFORM over ANY.
chorus_job_shape Stricter(chorus_job_shape a, chorus_job_shape b) {
  if (a == CHORUS_SHAPE_ONE_HOST || b == CHORUS_SHAPE_ONE_HOST) return CHORUS_SHAPE_ONE_HOST;
  if (a == CHORUS_SHAPE_UNIFORM || b == CHORUS_SHAPE_UNIFORM) return CHORUS_SHAPE_UNIFORM;
  return CHORUS_SHAPE_ANY;
}

}  // namespace

std::string PairName(const char* algorithm, const char* transport) {
  return std::string(algorithm) + "@" + transport;
}

std::unique_ptr<AlgorithmPair> AlgorithmPair::Make(std::shared_ptr<PluginLibrary> algorithm_plugin,
                                                   const chorus_algorithm_api& algorithm,
                                                   std::shared_ptr<PluginLibrary> transport_plugin,
                                                   const chorus_transport_api& transport) {
  std::unique_ptr<AlgorithmPair> pair(new AlgorithmPair());
  pair->algorithm_plugin_ = algorithm_plugin;
  pair->transport_plugin_ = transport_plugin;
  pair->what_.name = PairName(algorithm.name, transport.name);
  pair->what_.algorithm_plugin = &algorithm_plugin->table();
  pair->what_.algorithm = &algorithm;
  pair->what_.transport_plugin = &transport_plugin->table();
  pair->what_.transport = &transport;
  pair->what_.algorithm_library = std::move(algorithm_plugin);
  pair->what_.transport_library = std::move(transport_plugin);

  // The core copied both tables into its own layout, so a 1.2 plugin's reads as NULL here.
  const chorus_capabilities* transport_capabilities = transport.capabilities;
  pair->algorithm_capabilities_ = algorithm.capabilities;
  const chorus_capabilities* capabilities = nullptr;
  if (pair->algorithm_capabilities_ != nullptr && transport_capabilities != nullptr) {
    pair->transport_capabilities_ = *transport_capabilities;
    pair->transport_capabilities_.ops = sdk::kAllCollectiveOps;
    pair->capabilities_ = sdk::Capabilities(
        sdk::kHostMemory,
        Stricter(pair->algorithm_capabilities_->shape, transport_capabilities->shape),
        pair->algorithm_capabilities_->ops & algorithm.supported_ops, PairScore);
    pair->capabilities_.context = pair.get();
    capabilities = &pair->capabilities_;
  }
  pair->table_ = AlgorithmCollectiveTable(pair->what_.name.c_str(), PairCreate, capabilities);
  pair->table_.context = pair.get();
  return pair;
}

AlgorithmPair::~AlgorithmPair() = default;

chorus_status AlgorithmPair::Create(const chorus_communicator_create_args* args,
                                    chorus_communicator** out) const {
  return sdk::Guard([&] { CreateAlgorithmCommunicator(what_, args, out); });
}

uint32_t AlgorithmPair::Score(const chorus_score_args& args) const {
  const uint32_t algorithm = CapabilityScore(algorithm_capabilities_, args);
  if (algorithm == 0) return 0;
  return PairProduct(algorithm, CapabilityScore(&transport_capabilities_, args));
}

}  // namespace chorus::internal
