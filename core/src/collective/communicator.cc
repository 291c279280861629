#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/collective/communicator.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

#include "base/abort_scope.h"
#include "base/host_kernels.h"
#include "base/logging.h"
#include "base/watchdog.h"
#include "collective/autotune.h"
#include "collective/current_registry.h"
#include "collective/plan_check.h"
#include "collective/plugin_job.h"
#include "collective/signature_check.h"
#include "runtime/plugin_call.h"
#include "runtime/raw_options.h"

namespace chorus {
namespace {

using internal::Signature;

int64_t TimeoutMs(double seconds) { return static_cast<int64_t>(std::ceil(seconds * 1000)); }

// How long a failed operation waits for the job's health to name the worker that caused it: the
// store records a death at once, and a stopped worker's silence is known already.
constexpr std::chrono::milliseconds kDiagnoseWithin{2000};

bool ChecksFromEnvironment() {
  const auto value = GetEnv("CHORUS_CHECK_COLLECTIVES");
  return !value || *value != "0";
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The options the create of collective `index` of `plan` gets: the config's go to the fixed
// collective (without one, the primary); a "local+cross" one learns its parts.
Options OptionsFor(const CollectivePlan& plan, size_t index, const CommunicatorConfig& config) {
  const std::string& name = plan.collectives[index];
  const bool gets_options = plan.fixed.empty() ? index == 0 : name == plan.fixed;
  Options options = gets_options ? config.options : Options{};
  const auto [local, cross] = SplitComposite(name);
  if (!local.empty()) options.insert(options.begin(), {{"local", local}, {"cross", cross}});
  return options;
}

Registry::CollectiveImplementation FindCollective(const Registry& registry,
                                                  const std::string& name) {
  return SplitComposite(name).first.empty() ? registry.FindCollective(name, "the communicator")
                                            : ComposingCollective(registry, "'" + name + "'");
}

// "gloo 1.1.0, ABI 1.1": the plugin (a pair algorithm@transport: both) that serves a collective.
std::string PluginVersions(const Registry::CollectiveImplementation& entry) {
  // A pair algorithm@transport is as much its two plugins' as the core's that runs it.
  std::vector<std::shared_ptr<PluginLibrary>> libraries{entry.plugin};
  libraries.insert(libraries.end(), entry.parts.begin(), entry.parts.end());
  std::string text;
  for (const auto& library : libraries) {
    text += (text.empty() ? "" : " + ") + library->name() + " " + library->version() + ", ABI " +
            std::to_string(library->abi_major()) + "." + std::to_string(library->abi_minor());
  }
  return text;
}

// What this rank is about to create, for comparing with the other ranks (collective/plan_check.h).
// A collective this rank cannot find sets choices.error and *failure (the error to throw).
internal::PlanChoices ChoicesOf(const Registry& registry, const CollectivePlan& plan,
                                const CommunicatorConfig& config, std::exception_ptr* failure) {
  internal::PlanChoices choices;
  choices.size = config.size;
  choices.shape = plan.shape.Describe();
  choices.request = RequestName(plan.request);
  choices.source = internal::ShortSource(plan.source);
  choices.fixed = plan.fixed;
  choices.algorithm = DescribeRules(plan.variable_rules);
  choices.tuning = DescribeRules(plan.tuning_rules);
  choices.tuning_from = plan.tuning_source;
  if (!plan.autotune_candidates.empty()) {
    choices.autotune = JoinNames(plan.autotune_candidates) + "; " +
                       std::to_string(plan.autotune_samples) + " samples" +
                       // Whether a cache is used must agree (worker 0's decides for all); its
                       // path need not: the workers' hosts may keep it in different folders.
                       (plan.autotune_cache.empty() ? "" : "; with CHORUS_TUNING_CACHE");
  }
  for (size_t i = 0; i < plan.collectives.size(); ++i) {
    internal::PlanChoices::Collective collective;
    collective.name = plan.collectives[i];
    try {
      collective.plugin = PluginVersions(FindCollective(registry, collective.name));
    } catch (const std::exception& e) {
      if (!*failure) *failure = std::current_exception();
      if (choices.error.empty()) choices.error = e.what();
    }
    for (const auto& [key, value] : OptionsFor(plan, i, config)) {
      const bool per_rank =
          std::find(config.per_rank_options.begin(), config.per_rank_options.end(), key) !=
          config.per_rank_options.end();
      collective.options += (collective.options.empty() ? "" : ", ") + key + "=" +
                            (per_rank ? std::string("(per rank)") : value);
    }
    choices.collectives.push_back(std::move(collective));
  }
  return choices;
}

chorus_all_reduce_args AllReduceArgs(const void* send, void* recv, size_t count, chorus_dtype dtype,
                                     chorus_reduce_op op) {
  chorus_all_reduce_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  return args;
}

// The plugin calls that begin each operation, for Communicator::Run.
chorus_status StartAllReduce(const chorus_collective_api* api, chorus_communicator* handle,
                             const void* args, chorus_request** request) {
  return api->all_reduce(handle, static_cast<const chorus_all_reduce_args*>(args), request);
}
chorus_status StartBroadcast(const chorus_collective_api* api, chorus_communicator* handle,
                             const void* args, chorus_request** request) {
  return api->broadcast(handle, static_cast<const chorus_collective_broadcast_args*>(args),
                        request);
}
chorus_status StartAllGather(const chorus_collective_api* api, chorus_communicator* handle,
                             const void* args, chorus_request** request) {
  return api->all_gather(handle, static_cast<const chorus_collective_all_gather_args*>(args),
                         request);
}
chorus_status StartReduceScatter(const chorus_collective_api* api, chorus_communicator* handle,
                                 const void* args, chorus_request** request) {
  return api->reduce_scatter(handle, static_cast<const chorus_reduce_scatter_args*>(args), request);
}
chorus_status StartBarrier(const chorus_collective_api* api, chorus_communicator* handle,
                           const void*, chorus_request** request) {
  return api->barrier(handle, request);
}

}  // namespace

class Communicator::Activity {
 public:
  explicit Activity(Communicator& c) : c_(c), scope_(*c.abort_flag_) { ++c_.in_flight_; }
  ~Activity() { --c_.in_flight_; }

 private:
  Communicator& c_;
  internal::AbortScope scope_;
};

struct Communicator::Autotune {
  struct Band {
    uint64_t calls = 0;                        // tuned calls so far
    std::vector<std::vector<double>> samples;  // per candidate slot, microseconds
    int winner = -1;                           // slot, once decided
  };
  std::vector<size_t> backends;  // backends_ index of each candidate slot
  std::vector<std::string> names;
  int samples = 5;
  std::string cache_path;
  bool write_cache = false;  // rank 0, and the cache was not refused as someone else's
  internal::TuningCacheKey key;
  mutable std::mutex mutex;
  std::map<uint64_t, Band> bands;  // by the band's lower end
  std::vector<internal::BandDecision> decisions;
};

Communicator::Communicator() : abort_flag_(std::make_unique<internal::AbortFlag>()) {}

bool Communicator::WaitIdle(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (in_flight_.load() > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::unique_ptr<Communicator> Communicator::Create(const Registry& registry,
                                                   const std::string& name,
                                                   const CommunicatorConfig& config) {
  JobShape shape;
  shape.ranks = config.size;
  shape.ranks_per_host = config.size;
  return Create(registry, PlanNamed(registry, name, shape), config);
}

std::unique_ptr<Communicator> Communicator::Create(const Registry& registry,
                                                   const CollectivePlan& plan,
                                                   const CommunicatorConfig& config) {
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size) {
    throw Error(CHORUS_INVALID_ARGUMENT, "communicator: rank " + std::to_string(config.rank) +
                                             " of size " + std::to_string(config.size) +
                                             " is not a valid rank (0 <= rank < size)");
  }
  if (!config.store) throw Error(CHORUS_INVALID_ARGUMENT, "communicator: no rendezvous store");
  if (config.job_id.size() > 47 ||
      config.job_id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                      "0123456789_.-") != std::string::npos) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "communicator: job_id '" + config.job_id +
                    "' must be at most 47 characters of A-Z, a-z, 0-9, '_', '.' and '-' (plugins "
                    "name files and segments after it); leave it empty to draw one");
  }
  if (!config.task_names.empty() && config.task_names.size() != static_cast<size_t>(config.size)) {
    throw Error(CHORUS_INVALID_ARGUMENT, "communicator: task_names must have one name per rank");
  }
  if (plan.collectives.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "communicator: the plan names no collective");
  }
  std::unique_ptr<Communicator> self(new Communicator());
  self->config_ = config;
  self->config_.check_signatures = config.check_signatures && ChecksFromEnvironment();
  self->plan_ = plan;
  Activity activity(*self);
  internal::RegistryScope registry_scope(registry);  // for a plugin that composes others
  try {
    if (config.check_plan && config.size > 1) self->CheckPlanAcrossRanks(registry);
    if (config.job_id.empty()) {
      const CKvStore root(config.store);
      self->job_id_ = internal::JobIdOf(*root.get(), TimeoutMs(config.timeout_seconds),
                                        "communicator '" + config.name + "'");
    } else {
      self->job_id_ = config.job_id;
    }
    self->backends_.reserve(plan.collectives.size());
    // Every rank creates the same collectives in the same order, so their rendezvous meet.
    for (size_t i = 0; i < plan.collectives.size(); ++i) {
      self->AddBackend(registry, plan.collectives[i], OptionsFor(plan, i, config));
    }
    if (!plan.autotune_candidates.empty() && config.size > 1) self->StartAutotune(registry);
  } catch (const Error& e) {
    // A peer that went or fell silent during the creation: the job's health knows which worker.
    const chorus_status status = e.status();
    if (!config.health ||
        (status != CHORUS_PEER_LOST && status != CHORUS_TIMEOUT && status != CHORUS_ABORTED)) {
      throw;
    }
    const auto failure = config.health->Diagnose(status, kDiagnoseWithin);
    if (!failure || std::string_view(e.what()).find(failure->cause) != std::string_view::npos) {
      throw;
    }
    throw Error(failure->status, "communicator '" + config.name +
                                     "' could not be created: " + failure->cause + "; " + e.what());
  }
  if (config.health) {
    // A failure the job's health finds ends every operation at once, naming its cause.
    Communicator* raw = self.get();
    self->health_subscription_ = config.health->Subscribe(
        [raw](const JobFailure& failure) { raw->Abort(failure.status, failure.cause); });
  }
  if (plan.collectives.size() > 1 || !plan.variable_rules.empty()) {
    Log().info("communicator '{}': {} ({}); created {}{}{}", config.name, plan.collectives[0],
               plan.source, JoinNames(plan.collectives),
               plan.variable_rules.empty()
                   ? ""
                   : "; CHORUS_ALGORITHM " + DescribeRules(plan.variable_rules),
               plan.tuning_rules.empty()
                   ? ""
                   : "; " + plan.tuning_source + " " + DescribeRules(plan.tuning_rules));
  }
  return self;
}

// Every rank must create the same collectives with the same options, or their rendezvous never
// meet: a worker with another plugin set or other variables would wait out the whole time-out.
// Each rank publishes what it is about to create and learns, before anyone creates anything,
// whether every rank agrees (collective/plan_check.h). A rank that cannot say (a collective it
// lacks) publishes its error, so that the others fail at once too, and throws it.
void Communicator::CheckPlanAcrossRanks(const Registry& registry) {
  KvStore& store = *config_.store;
  const std::string base = "comm/" + config_.name + "/plan/";
  const int64_t generation = store.Add(base + "creates/" + std::to_string(config_.rank), 1);
  internal::PlanExchange exchange;
  exchange.store = &store;
  exchange.prefix = base + std::to_string(generation) + "/";
  exchange.rank = config_.rank;
  exchange.size = config_.size;
  exchange.timeout = std::chrono::milliseconds(TimeoutMs(config_.timeout_seconds));
  exchange.timeout_seconds = config_.timeout_seconds;
  exchange.task_name = [this](int rank) { return TaskName(rank); };
  exchange.what = "communicator '" + config_.name + "'";
  std::exception_ptr failure;
  internal::AgreeOnPlan(exchange, ChoicesOf(registry, plan_, config_, &failure));
  if (failure) std::rethrow_exception(failure);
}

void Communicator::AddBackend(const Registry& registry, const std::string& name,
                              const Options& options) {
  Backend backend;
  backend.name = name;
  const auto entry = FindCollective(registry, name);
  backend.library = entry.plugin;
  backend.api = entry.api;
  // A pair algorithm@transport runs in the core, but its code is its two plugins'.
  if (entry.parts.empty()) {
    backend.plugins = internal::PluginWords(*entry.plugin);
  } else {
    for (const auto& part : entry.parts) {
      backend.plugins += (backend.plugins.empty() ? "" : " and ") + internal::PluginWords(*part);
    }
  }
  if (!backend.api->create || !backend.api->destroy || !backend.api->all_reduce) {
    throw Error(CHORUS_UNSUPPORTED,
                "collective '" + backend.name + "' lacks create, destroy or all_reduce");
  }
  backend.store = std::make_unique<CKvStore>(
      WithPrefix(config_.store, "comm/" + config_.name + "/" + backend.name + "/"));
  const auto raw = internal::RawOptions(options);
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = config_.rank;
  args.size = config_.size;
  args.store = backend.store->get();
  args.timeout_ms = TimeoutMs(config_.timeout_seconds);
  args.options = raw.data();
  args.num_options = raw.size();
  args.address = config_.address.empty() ? nullptr : config_.address.c_str();
  args.host_id = config_.host_id.empty() ? nullptr : config_.host_id.c_str();
  args.context = backend.api->context;
  backend.job = std::make_shared<internal::PluginJob>(
      job_id_, config_.task_index >= 0 ? config_.task_index : config_.rank,
      config_.num_tasks > 0 ? config_.num_tasks : config_.size,
      config_.host_id.empty() ? HostIdentity() : config_.host_id, args.store, args.timeout_ms,
      internal::ObjectIdOf(*args.store, config_.rank, job_id_, args.timeout_ms,
                           "communicator '" + config_.name + "' over " + backend.name));
  args.job = &backend.job->job;
  args.object_id = backend.job->object_id.c_str();
  const std::string what = backend.plugins + ": create of collective '" + backend.name + "' on " +
                           TaskName(config_.rank);
  const auto timeout = std::chrono::milliseconds(args.timeout_ms);
  const chorus_status status = internal::CreateInPlugin(
      what, timeout, [&] { return backend.api->create(&args, &backend.handle); });
  if (status != CHORUS_OK) {
    throw Error(status, "collective '" + backend.name + "' (plugin " + backend.library->name() +
                            ") could not create the communicator of " + TaskName(config_.rank) +
                            " (rank " + std::to_string(config_.rank) + " of " +
                            std::to_string(config_.size) + "): " + backend.library->LastError());
  }
  Log().debug("communicator '{}' over {}: rank {} of {}", config_.name, backend.name, config_.rank,
              config_.size);
  backends_.push_back(std::move(backend));
}

Communicator::~Communicator() {
  if (config_.health && health_subscription_ != 0)
    config_.health->Unsubscribe(health_subscription_);
  // A plugin's destroy may wait for its peers (a goodbye); after an abort it must not.
  internal::AbortScope scope(*abort_flag_);
  for (auto it = backends_.rbegin(); it != backends_.rend(); ++it) {
    if (it->handle == nullptr) continue;
    const std::string what =
        it->plugins + ": destroy of collective '" + it->name + "' on " + TaskName(config_.rank);
    auto watch = internal::Watch(
        internal::WatchdogLimitFor(std::chrono::milliseconds(TimeoutMs(config_.timeout_seconds))),
        internal::kWatchdogGrace, [&] { return what; },
        [&](const std::string& message) { RaiseAbort(CHORUS_TIMEOUT, message); });
    try {
      it->api->destroy(it->handle);
    } catch (const std::exception& e) {
      Log().error("{}", internal::ThrewAcrossTheAbi(what, e.what()));
    } catch (...) {
      Log().error("{}", internal::ThrewAcrossTheAbi(what, nullptr));
    }
  }
}

const Communicator::Backend& Communicator::Route(chorus_collective_op op, chorus_dtype dtype,
                                                 uint64_t bytes) const {
  if (backends_.size() == 1) return backends_[0];
  const auto find = [&](const std::string& name) -> const Backend& {
    for (const Backend& b : backends_) {
      if (b.name == name) return b;
    }
    return backends_[0];  // unreachable: the plan created every collective a rule names
  };
  if (auto routed = RouteFor(plan_.variable_rules, op, bytes)) return find(*routed);
  if (!plan_.fixed.empty()) return find(plan_.fixed);
  if (auto routed = RouteFor(plan_.tuning_rules, op, bytes)) return find(*routed);
  if (autotune_ && op == CHORUS_OP_ALL_REDUCE) {
    std::lock_guard<std::mutex> lock(autotune_->mutex);
    const auto band = autotune_->bands.find(internal::BandOf(bytes).lo);
    if (band != autotune_->bands.end() && band->second.winner >= 0) {
      return backends_[autotune_->backends[static_cast<size_t>(band->second.winner)]];
    }
  }
  // The best score among the collectives created (ties: the first created).
  const auto args = ScoreArgs(op, dtype, bytes, plan_.shape, plan_.request);
  const Backend* best = nullptr;
  uint32_t best_score = 0;
  std::string reasons;  // only when nothing serves it
  for (const Backend& b : backends_) {
    const uint32_t score = ScoreValue(b.api->capabilities, args);
    if (score > best_score) {
      best = &b;
      best_score = score;
    }
  }
  if (best == nullptr) {
    for (const Backend& b : backends_) {
      reasons += "; " + b.name + " " + ScoreOf(b.api->capabilities, args).reason;
    }
    throw Error(CHORUS_UNSUPPORTED, std::string("no collective of communicator '") + config_.name +
                                        "' serves " + CollectiveOpName(op) + " of " +
                                        std::to_string(bytes) + " bytes of " + DtypeName(dtype) +
                                        reasons);
  }
  return *best;
}

const std::string& Communicator::BackendFor(chorus_collective_op op, uint64_t bytes,
                                            chorus_dtype dtype) const {
  return Route(op, dtype, bytes).name;
}

// ---- Autotuning (collective/autotune.h) -------------------------------------------------------

void Communicator::StartAutotune(const Registry& registry) {
  auto tune = std::make_unique<Autotune>();
  tune->samples = std::max(1, plan_.autotune_samples);
  tune->cache_path = plan_.autotune_cache;
  tune->key.workers = config_.size;
  tune->key.hosts = plan_.shape.hosts;
  tune->key.ranks_per_host = plan_.shape.ranks_per_host;
  tune->key.chorus_version = CHORUS_VERSION_STRING;
  for (const auto& name : plan_.autotune_candidates) {
    for (size_t i = 0; i < backends_.size(); ++i) {
      if (backends_[i].name != name) continue;
      tune->backends.push_back(i);
      tune->names.push_back(name);
      tune->key.candidates += (tune->key.candidates.empty() ? "" : ", ") + name + " (" +
                              PluginVersions(FindCollective(registry, name)) + ")";
      break;
    }
  }
  if (!tune->cache_path.empty()) {
    // Rank 0's cache decides for every rank (the workers' hosts may hold different files): it
    // publishes what it read, as a cache's text, and the others adopt that.
    KvStore& store = *config_.store;
    const std::string base = "comm/" + config_.name + "/autotune/";
    const int64_t generation = store.Add(base + "creates/" + std::to_string(config_.rank), 1);
    const std::string key = base + std::to_string(generation) + "/cache";
    internal::TuningCacheRead read;
    if (config_.rank == 0) {
      read = internal::ReadTuningCache(tune->cache_path, tune->key);
      if (!read.problem.empty()) Log().warn("communicator '{}': {}", config_.name, read.problem);
      tune->write_cache = !read.foreign;
      store.Set(key, ToBytes(internal::WriteTuningCache(tune->key, read.decisions)));
    } else {
      const std::string text =
          ToString(store.Get(key, std::chrono::milliseconds(TimeoutMs(config_.timeout_seconds))));
      read =
          internal::ParseTuningCache(text, tune->cache_path + " (as worker 0 read it)", tune->key);
      if (!read.problem.empty()) {
        throw Error(CHORUS_INVALID_ARGUMENT,
                    "communicator '" + config_.name + "': " + read.problem +
                        "; this worker's plugins or chorus differ from worker 0's");
      }
    }
    for (const auto& decision : read.decisions) {
      const auto slot = std::find(tune->names.begin(), tune->names.end(), decision.winner);
      if (slot == tune->names.end()) continue;
      tune->bands[decision.band.lo].winner = static_cast<int>(slot - tune->names.begin());
      tune->decisions.push_back(decision);
    }
    if (!tune->decisions.empty() && config_.rank == 0) {
      Log().info("communicator '{}': CHORUS_TUNING_CACHE={} decides {} size band(s): {}",
                 config_.name, tune->cache_path, tune->decisions.size(), DescribeRules([&] {
                   std::vector<AlgorithmRule> rules;
                   for (const auto& d : tune->decisions) {
                     rules.push_back({CHORUS_OP_ALL_REDUCE, d.band.lo, d.band.hi, d.winner});
                   }
                   return rules;
                 }()));
    }
  }
  autotune_ = std::move(tune);
}

const Communicator::Backend* Communicator::TunedBackend(uint64_t bytes, size_t* slot) {
  // A rule the user wrote outranks autotuning.
  if (RouteFor(plan_.variable_rules, CHORUS_OP_ALL_REDUCE, bytes) ||
      RouteFor(plan_.tuning_rules, CHORUS_OP_ALL_REDUCE, bytes)) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(autotune_->mutex);
  Autotune::Band& band = autotune_->bands[internal::BandOf(bytes).lo];
  if (band.winner >= 0) return nullptr;  // Route runs it on the winner
  const size_t candidates = autotune_->backends.size();
  if (band.samples.empty()) band.samples.resize(candidates);
  // Blocks of consecutive calls per candidate: one untimed, then the samples.
  *slot =
      static_cast<size_t>(band.calls / static_cast<uint64_t>(autotune_->samples + 1)) % candidates;
  return &backends_[autotune_->backends[*slot]];
}

void Communicator::RecordTunedCall(uint64_t bytes, chorus_dtype dtype, size_t slot,
                                   double microseconds) {
  const internal::SizeBand band_range = internal::BandOf(bytes);
  const size_t candidates = autotune_->backends.size();
  std::vector<double> medians;
  {
    std::lock_guard<std::mutex> lock(autotune_->mutex);
    Autotune::Band& band = autotune_->bands[band_range.lo];
    if (band.winner >= 0) return;
    // The first call of each candidate's block warms it up (connections, first-touch pages,
    // caches another collective used): not timed.
    if (band.calls % static_cast<uint64_t>(autotune_->samples + 1) != 0) {
      band.samples[slot].push_back(microseconds);
    }
    ++band.calls;
    if (band.calls < candidates * static_cast<uint64_t>(autotune_->samples + 1)) return;
    for (const auto& samples : band.samples) medians.push_back(internal::MedianOf(samples));
  }
  // Every rank gets here at the same call of the band (the ranks issue the same operations in
  // the same order, which the signature check enforces): the slowest rank's median decides, so
  // every rank computes the same winner.
  std::vector<double> slowest(medians.size());
  const chorus_all_reduce_args args =
      AllReduceArgs(medians.data(), slowest.data(), medians.size(), CHORUS_F64, CHORUS_REDUCE_MAX);
  Run(backends_[0], "all_reduce (autotuning's exchange of timings)", StartAllReduce, &args);
  // The candidate the scores pick at this size keeps the band unless another is clearly faster.
  size_t incumbent = candidates;
  uint32_t best_score = 0;
  const auto score_args = ScoreArgs(CHORUS_OP_ALL_REDUCE, dtype, bytes, plan_.shape, plan_.request);
  for (size_t i = 0; i < candidates; ++i) {
    const uint32_t score =
        ScoreValue(backends_[autotune_->backends[i]].api->capabilities, score_args);
    if (score > best_score) {
      best_score = score;
      incumbent = i;
    }
  }
  const size_t winner = internal::FastestCandidate(slowest, incumbent);
  internal::BandDecision decision;
  decision.band = band_range;
  decision.winner = autotune_->names[winner];
  for (size_t i = 0; i < candidates; ++i) {
    decision.times_us.emplace_back(autotune_->names[i], slowest[i]);
  }
  std::string cache;
  {
    std::lock_guard<std::mutex> lock(autotune_->mutex);
    autotune_->bands[band_range.lo].winner = static_cast<int>(winner);
    autotune_->decisions.push_back(decision);
    if (autotune_->write_cache) {
      cache = internal::WriteTuningCache(autotune_->key, autotune_->decisions);
    }
  }
  if (config_.rank == 0) {
    Log().info("communicator '{}': autotuned {} (CHORUS_AUTOTUNE, {} calls per candidate)",
               config_.name, decision.Describe(), autotune_->samples);
  }
  if (cache.empty()) return;
  try {
    internal::ReplaceFileAtomically(autotune_->cache_path, cache);
  } catch (const Error& e) {
    Log().warn("communicator '{}': {}; the decisions are not kept", config_.name, e.what());
    std::lock_guard<std::mutex> lock(autotune_->mutex);
    autotune_->write_cache = false;
  }
}

bool Communicator::Tuning(chorus_collective_op op, uint64_t bytes) const {
  if (!autotune_ || op != CHORUS_OP_ALL_REDUCE || bytes == 0 ||
      RouteFor(plan_.variable_rules, op, bytes) || RouteFor(plan_.tuning_rules, op, bytes)) {
    return false;
  }
  std::lock_guard<std::mutex> lock(autotune_->mutex);
  const auto band = autotune_->bands.find(internal::BandOf(bytes).lo);
  return band == autotune_->bands.end() || band->second.winner < 0;
}

std::vector<std::string> Communicator::AutotuneDecisions() const {
  std::vector<std::string> lines;
  if (!autotune_) return lines;
  std::lock_guard<std::mutex> lock(autotune_->mutex);
  for (const auto& decision : autotune_->decisions) lines.push_back(decision.Describe());
  return lines;
}

std::string Communicator::TaskName(int rank) const {
  if (rank >= 0 && static_cast<size_t>(rank) < config_.task_names.size()) {
    return config_.task_names[static_cast<size_t>(rank)];
  }
  return "rank " + std::to_string(rank);
}

void Communicator::Abort(chorus_status status, const std::string& reason) {
  (void)RaiseAbort(status, reason);
}

bool Communicator::Aborted() const {
  if (!abort_claimed_.load()) return false;
  while (!aborted_.load()) std::this_thread::yield();  // the winner is writing its reason
  return true;
}

bool Communicator::RaiseAbort(chorus_status status, const std::string& reason) {
  bool expected = false;
  if (!abort_claimed_.compare_exchange_strong(expected, true)) return false;
  abort_reason_ = reason;
  abort_status_.store(status);
  aborted_.store(true);
  abort_flag_->Raise();
  Log().error("communicator over {}: {}", backends_.empty() ? "(none yet)" : backend(), reason);
  for (const Backend& b : backends_) {
    if (b.api->abort != nullptr && b.handle != nullptr) b.api->abort(b.handle);
  }
  return true;
}

void Communicator::Fail(const Backend& backend, chorus_status status, const std::string& what,
                        const std::string& detail) {
  const std::string where = what + " over " + backend.name + " on " + TaskName(config_.rank);
  // The plugin saw a neighbour go or fall silent; the job's health knows which worker did.
  const bool job_failure =
      status == CHORUS_PEER_LOST || status == CHORUS_TIMEOUT || status == CHORUS_ABORTED;
  if (job_failure && config_.health && !Aborted()) {
    if (auto failure = config_.health->Diagnose(status, kDiagnoseWithin)) {
      Abort(failure->status, failure->cause);
    }
  }
  if (status == CHORUS_TIMEOUT && !Aborted()) {
    // A time-out aborts the whole communicator: the other ranks may still be inside the
    // operation, and every wait of this job on this rank must end now.
    const std::string message =
        where + " did not finish within " + std::to_string(config_.timeout_seconds) +
        " s (CommunicationOptions.timeout_seconds or CHORUS_TIMEOUT_SECONDS): " + detail +
        "; the communicator is aborted";
    if (RaiseAbort(CHORUS_TIMEOUT, message)) throw Error(CHORUS_TIMEOUT, message);
  }
  if (Aborted()) {
    // The abort's reason first (the cause), then what the plugin said, unless it only echoes
    // the abort.
    std::string message = where + " failed: " + abort_reason_;
    if (status != CHORUS_ABORTED && !detail.empty()) {
      message += "; " + backend.name + " said: " + detail;
    }
    throw Error(abort_status_.load(), message);
  }
  const std::string hint =
      status == CHORUS_PEER_LOST
          ? " (another worker's process ended, or it left the operation after a failure of its "
            "own; the job cannot continue without it)"
          : "";
  const std::string message = where + " failed with " + StatusName(status) + ": " + detail + hint;
  // A lost peer ends the job: every other wait of this communicator (its other collectives, other
  // threads) must end too.
  if (status == CHORUS_PEER_LOST) Abort(CHORUS_PEER_LOST, message);
  throw Error(status, message);
}

void Communicator::Run(const Backend& backend, const char* what, StartFn start, const void* args) {
  const auto timeout = std::chrono::milliseconds(TimeoutMs(config_.timeout_seconds));
  // Set by the watchdog's thread while this frame waits in the call (the watch outlives it).
  std::atomic<bool> late{false};
  auto watch = internal::Watch(
      internal::WatchdogLimitFor(timeout), internal::kWatchdogGrace,
      [&] {
        return std::string(what) + " over " + backend.name + " (" + backend.plugins + ") on " +
               TaskName(config_.rank);
      },
      [&](const std::string& message) {
        late.store(true);
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", config_.timeout_seconds);
        RaiseAbort(CHORUS_TIMEOUT, message + ": the plugin does not keep its time-out of " + limit +
                                       " s (CHORUS_TIMEOUT_SECONDS); the communicator is aborted");
      });
  chorus_request* request = nullptr;
  const chorus_status status = internal::CallPlugin(
      [&] { return backend.plugins + ": its " + what + " over " + backend.name; },
      [&] { return start(backend.api, backend.handle, args, &request); });
  Finish(backend, status, request, what);
  // The plugin returned after the watchdog had aborted the communicator: whatever it says, the
  // other workers have given up on this operation.
  if (late.load())
    Fail(backend, CHORUS_TIMEOUT, what, "it returned only after the watchdog's limit");
}

void Communicator::Finish(const Backend& backend, chorus_status status, chorus_request* request,
                          const char* what) {
  const chorus_plugin& table = backend.library->table();
  if (status == CHORUS_OK && request != nullptr) {
    status = internal::CallPlugin(
        [&] {
          return backend.plugins + ": its request_wait for " + what + " over " + backend.name;
        },
        [&] { return table.request_wait(request, TimeoutMs(config_.timeout_seconds)); });
    if (status == CHORUS_TIMEOUT) {
      // The operation may still write into the caller's buffers: abort the communicator before
      // giving the buffers back (Fail does), and leak the request rather than free it under a
      // live operation.
      Fail(backend, CHORUS_TIMEOUT, what, "the operation did not finish in time");
    }
    const std::string message = status == CHORUS_OK ? "" : backend.library->LastError();
    table.request_free(request);
    if (status != CHORUS_OK) Fail(backend, status, what, message);
    return;
  }
  if (status != CHORUS_OK) Fail(backend, status, what, backend.library->LastError());
}

void Communicator::CheckSignature(int op, size_t count, chorus_dtype dtype, chorus_reduce_op reduce,
                                  int root, const Backend& routed) {
  const Backend& own = backends_[0];
  if (aborted_.load()) {
    Fail(own, abort_status_.load(), internal::SignatureOpName(op), "");
  }
  const Signature mine{static_cast<int64_t>(sequence_++),
                       op,
                       static_cast<int64_t>(count),
                       dtype,
                       reduce,
                       root,
                       static_cast<int64_t>(&routed - backends_.data())};
  if (!config_.check_signatures || config_.size == 1 || own.api->all_gather == nullptr) return;
  constexpr size_t kFields = sizeof(Signature) / sizeof(int64_t);
  std::vector<Signature> all(static_cast<size_t>(config_.size));
  chorus_collective_all_gather_args args{};
  args.struct_size = sizeof(args);
  args.send = &mine;
  args.recv = all.data();
  args.count = kFields;
  args.dtype = CHORUS_I64;
  const std::string what =
      std::string(internal::SignatureOpName(op)) + " #" + std::to_string(mine.sequence);
  Run(own, (what + " (exchanging its signature)").c_str(), StartAllGather, &args);
  const std::string mismatch = internal::SignatureMismatch(
      all, [this](int rank) { return TaskName(rank); },
      [this](int64_t index) {
        return index >= 0 && static_cast<size_t>(index) < backends_.size()
                   ? backends_[static_cast<size_t>(index)].name
                   : "collective #" + std::to_string(index);
      });
  if (!mismatch.empty()) throw Error(CHORUS_INVALID_ARGUMENT, mismatch);
}

void Communicator::AllReduce(const void* send, void* recv, size_t count, chorus_dtype dtype,
                             chorus_reduce_op op) {
  Activity activity(*this);
  if (op < 0 || op >= CHORUS_REDUCE_OP_COUNT) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "all_reduce: reduce op " + std::to_string(op) + " is not a chorus reduce op");
  }
  const uint64_t bytes = count * chorus_dtype_size(dtype);
  size_t tuned_slot = 0;
  const Backend* tuned = autotune_ && count > 0 ? TunedBackend(bytes, &tuned_slot) : nullptr;
  const Backend& b = tuned != nullptr ? *tuned : Route(CHORUS_OP_ALL_REDUCE, dtype, bytes);
  CheckSignature(internal::kAllReduce, count, dtype, op, 0, b);
  if (count == 0) return;
  const chorus_all_reduce_args args =
      AllReduceArgs(send, recv, count, dtype, op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op);
  const auto start = std::chrono::steady_clock::now();
  Run(b, "all_reduce", StartAllReduce, &args);
  if (tuned != nullptr) {
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    RecordTunedCall(bytes, dtype, tuned_slot, took.count());
  }
  if (op == CHORUS_REDUCE_MEAN) {
    internal::DivideHost(recv, count, dtype, static_cast<uint64_t>(config_.size));
  }
}

void Communicator::Broadcast(void* data, size_t count, chorus_dtype dtype, int root) {
  Activity activity(*this);
  if (root < 0 || root >= config_.size) {
    throw Error(CHORUS_INVALID_ARGUMENT, "broadcast: root " + std::to_string(root) +
                                             " is not a rank of " + std::to_string(config_.size));
  }
  const Backend& b = Route(CHORUS_OP_BROADCAST, dtype, count * chorus_dtype_size(dtype));
  if (b.api->broadcast == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no broadcast");
  }
  CheckSignature(internal::kBroadcast, count, dtype, CHORUS_REDUCE_SUM, root, b);
  if (count == 0 || config_.size == 1) return;
  chorus_collective_broadcast_args args{};
  args.struct_size = sizeof(args);
  args.data = data;
  args.count = count;
  args.dtype = dtype;
  args.root = root;
  Run(b, "broadcast", StartBroadcast, &args);
}

void Communicator::AllGather(const void* send, void* recv, size_t count, chorus_dtype dtype) {
  Activity activity(*this);
  const Backend& b = Route(CHORUS_OP_ALL_GATHER, dtype,
                           count * chorus_dtype_size(dtype) * static_cast<uint64_t>(config_.size));
  if (b.api->all_gather == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no all_gather");
  }
  CheckSignature(internal::kAllGather, count, dtype, CHORUS_REDUCE_SUM, 0, b);
  if (count == 0) return;
  chorus_collective_all_gather_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  Run(b, "all_gather", StartAllGather, &args);
}

void Communicator::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                 chorus_dtype dtype, chorus_reduce_op op) {
  Activity activity(*this);
  const Backend& b =
      Route(CHORUS_OP_REDUCE_SCATTER, dtype,
            recv_count * chorus_dtype_size(dtype) * static_cast<uint64_t>(config_.size));
  if (b.api->reduce_scatter == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no reduce_scatter");
  }
  if (op < 0 || op >= CHORUS_REDUCE_OP_COUNT) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "reduce_scatter: reduce op " + std::to_string(op) + " is not a chorus reduce op");
  }
  CheckSignature(internal::kReduceScatter, recv_count, dtype, op, 0, b);
  if (recv_count == 0) return;
  chorus_reduce_scatter_args args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.recv_count = recv_count;
  args.dtype = dtype;
  args.op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;
  Run(b, "reduce_scatter", StartReduceScatter, &args);
  if (op == CHORUS_REDUCE_MEAN) {
    internal::DivideHost(recv, recv_count, dtype, static_cast<uint64_t>(config_.size));
  }
}

void Communicator::Barrier() {
  Activity activity(*this);
  const Backend& b = Route(CHORUS_OP_BARRIER, CHORUS_U8, 0);
  if (b.api->barrier == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "collective '" + b.name + "' provides no barrier");
  }
  CheckSignature(internal::kBarrier, 0, CHORUS_U8, CHORUS_REDUCE_SUM, 0, b);
  if (config_.size == 1) return;
  Run(b, "barrier", StartBarrier, nullptr);
}

}  // namespace chorus
