#include "runtime/algorithm_pairs.h"

#include <array>
#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <mutex>
#include <utility>

#include "runtime/capability_score.h"

namespace chorus::internal {
namespace {

// The pair in each slot; the slot's create and score functions read it.
std::array<std::atomic<const AlgorithmPair*>, kMaxAlgorithmPairs>& Slots() {
  static std::array<std::atomic<const AlgorithmPair*>, kMaxAlgorithmPairs> slots{};
  return slots;
}
std::mutex& SlotsMutex() {
  static std::mutex mutex;
  return mutex;
}

template <size_t N>
chorus_status CreateAt(const chorus_communicator_create_args* args, chorus_communicator** out) {
  const AlgorithmPair* pair = Slots()[N].load(std::memory_order_acquire);
  if (pair == nullptr) {
    return sdk::SetError(CHORUS_INTERNAL, "an algorithm@transport collective outlived its pair");
  }
  return pair->Create(args, out);
}

template <size_t N>
uint32_t ScoreAt(const chorus_score_args* args) {
  const AlgorithmPair* pair = Slots()[N].load(std::memory_order_acquire);
  return pair == nullptr || args == nullptr ? 0 : pair->Score(*args);
}

using CreateFunction = chorus_status (*)(const chorus_communicator_create_args*,
                                         chorus_communicator**);
using ScoreFunction = uint32_t (*)(const chorus_score_args*);

template <size_t... N>
constexpr std::array<std::pair<CreateFunction, ScoreFunction>, sizeof...(N)> SlotFunctions(
    std::index_sequence<N...>) {
  return {{{&CreateAt<N>, &ScoreAt<N>}...}};
}

constexpr auto kSlotFunctions = SlotFunctions(std::make_index_sequence<kMaxAlgorithmPairs>());

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
                                                   const chorus_transport_api& transport,
                                                   std::string* why_not) {
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
  {
    std::lock_guard<std::mutex> lock(SlotsMutex());
    size_t slot = 0;
    while (slot < kMaxAlgorithmPairs && Slots()[slot].load() != nullptr) ++slot;
    if (slot == kMaxAlgorithmPairs) {
      *why_not = "more than " + std::to_string(kMaxAlgorithmPairs) +
                 " algorithm@transport pairs in this process";
      return nullptr;
    }
    pair->slot_ = slot;
    Slots()[slot].store(pair.get(), std::memory_order_release);
  }
  const auto [create, score] = kSlotFunctions[pair->slot_];
  const chorus_capabilities* capabilities = nullptr;
  if (pair->algorithm_capabilities_ != nullptr && transport_capabilities != nullptr) {
    pair->transport_capabilities_ = *transport_capabilities;
    pair->transport_capabilities_.ops = sdk::kAllCollectiveOps;
    pair->capabilities_ = sdk::Capabilities(
        sdk::kHostMemory,
        Stricter(pair->algorithm_capabilities_->shape, transport_capabilities->shape),
        pair->algorithm_capabilities_->ops & algorithm.supported_ops, score);
    capabilities = &pair->capabilities_;
  }
  pair->table_ = AlgorithmCollectiveTable(pair->what_.name.c_str(), create, capabilities);
  return pair;
}

AlgorithmPair::~AlgorithmPair() {
  std::lock_guard<std::mutex> lock(SlotsMutex());
  Slots()[slot_].store(nullptr, std::memory_order_release);
}

chorus_status AlgorithmPair::Create(const chorus_communicator_create_args* args,
                                    chorus_communicator** out) const {
  return sdk::Guard([&] { CreateAlgorithmCommunicator(what_, args, out); });
}

uint32_t AlgorithmPair::Score(const chorus_score_args& args) const {
  const uint64_t algorithm = CapabilityScore(algorithm_capabilities_, args);
  if (algorithm == 0) return 0;
  const uint64_t transport = CapabilityScore(&transport_capabilities_, args);
  return static_cast<uint32_t>(algorithm * transport / CHORUS_SCORE_MAX);
}

}  // namespace chorus::internal
