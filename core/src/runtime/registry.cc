#include <chorus/base/error.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "base/logging.h"
#include "base/text.h"
#include "runtime/algorithm_pairs.h"
#include "runtime/core_ring_collective.h"

namespace chorus {

Registry::Registry(const LoaderOptions& options) {
  std::string reason;
  auto builtin = PluginLibrary::FromBuiltinTable(internal::CorePluginTable(), &reason);
  if (!builtin) throw Error(CHORUS_INTERNAL, "the builtin plugin was rejected: " + reason);
  plugins_.push_back(builtin);
  discovery_ = DiscoverPlugins(options);
  for (auto& plugin : discovery_.loaded) {
    if (plugin->name() == kBuiltinPluginName) {
      discovery_.rejected.push_back({plugin->path(), "the name '" + plugin->name() +
                                                         "' belongs to a plugin builtin to "
                                                         "chorus; rename it"});
      continue;
    }
    plugins_.push_back(plugin);
  }
  for (const auto& plugin : plugins_) Index(plugin);
  IndexAlgorithmPairs();
}

void Registry::Index(const std::shared_ptr<PluginLibrary>& plugin) {
  auto add = [&](auto& list, const auto* api, const char* what) {
    for (const auto& existing : list) {
      if (std::string_view(existing.api->name) == api->name) {
        notes_.push_back(std::string(what) + " '" + api->name + "' of plugin " + plugin->name() +
                         " is left out: plugin " + existing.plugin->name() +
                         " provides one of that name already (first found wins)");
        return;
      }
    }
    list.push_back({plugin, api, {}});
  };
  for (const auto* api : plugin->collectives()) add(collectives_, api, "collective");
  for (const auto* api : plugin->cross_device_ops_list()) {
    add(cross_device_ops_, api, "cross-device ops");
  }
  for (const auto* api : plugin->algorithms()) add(algorithms_, api, "algorithm");
  for (const auto* api : plugin->transports()) add(transports_, api, "transport");
}

void Registry::IndexAlgorithmPairs() {
  for (const auto& algorithm : algorithms_) {
    for (const auto& transport : transports_) {
      const std::string name = internal::PairName(algorithm.api->name, transport.api->name);
      if (name == kCoreRingPairName && algorithm.plugin->builtin() && transport.plugin->builtin()) {
        continue;  // that is core_ring
      }
      const std::string_view a = algorithm.api->name, t = transport.api->name;
      if (a.find_first_of("@+") != std::string_view::npos ||
          t.find_first_of("@+") != std::string_view::npos) {
        notes_.push_back("no collective " + name +
                         ": an algorithm's or transport's name with '@' "
                         "or '+' cannot be told apart in a collective's name; rename it");
        continue;
      }
      const bool taken = std::any_of(collectives_.begin(), collectives_.end(),
                                     [&](const auto& c) { return name == c.api->name; });
      if (taken) {
        notes_.push_back("no collective " + name + " of algorithm " + std::string(a) +
                         " over transport " + std::string(t) +
                         ": a plugin's collective has that name already");
        continue;
      }
      std::shared_ptr<internal::AlgorithmPair> pair = internal::AlgorithmPair::Make(
          algorithm.plugin, *algorithm.api, transport.plugin, *transport.api);
      collectives_.push_back(
          {plugins_.front(), pair->table(), {algorithm.plugin, transport.plugin}});
      algorithm_pairs_.push_back(std::move(pair));
    }
  }
}

Registry& Registry::Global() {
  // Never destroyed. Work on other threads (a parameter server's RPC threads, a progress thread,
  // a step still running when a handler calls exit()) may use the registry while the process
  // exits; destroyed at exit, it crashed such a thread (SIGSEGV in DeviceEnumerators) instead of
  // letting the process end. Its plugins stay loaded and are not shut down: the process's end
  // releases them, and their static destructors run then.
  static Registry* registry = [] {
    // Any other registry destroyed during the exit (a program's static one) leaves its plugins
    // mapped too: a dlclose at exit races the threads that still run their code.
    std::atexit([] { PluginLibrary::LeaveLoadedFromNowOn(); });
    return new Registry(LoaderOptions::FromEnvironment());
  }();
  return *registry;
}

std::shared_ptr<PluginLibrary> Registry::FindPlugin(std::string_view name) const {
  for (const auto& plugin : plugins_) {
    if (plugin->name() == name) return plugin;
  }
  return nullptr;
}

std::vector<std::string> Registry::CrossDeviceOpsNames() const {
  std::vector<std::string> names;
  for (const auto& entry : cross_device_ops_) names.push_back(entry.api->name);
  return names;
}

std::vector<std::string> Registry::CollectiveNames() const {
  std::vector<std::string> names;
  for (const auto& entry : collectives_) names.push_back(entry.api->name);
  return names;
}

namespace {

// "did you mean X?" for the available name `name` most likely misspells, "" when none is close.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& names) {
  const std::string closest = ClosestName(name, names);
  return closest.empty() ? "" : "did you mean " + closest + "?";
}

// `suggest` says what the user may have meant (a sentence, "" for nothing) when no
// implementation is called `name`.
template <typename Entry>
Entry Find(const std::vector<Entry>& list,
           const std::vector<std::shared_ptr<PluginLibrary>>& plugins, const Discovery& discovery,
           std::string_view name, std::string_view what, const char* interface,
           const std::function<std::string()>& suggest) {
  for (const auto& entry : list) {
    if (name == entry.api->name) return entry;
  }
  // A plugin's name stands for its implementation when it has exactly one (the pairs the core
  // makes of algorithms and transports are nobody's own).
  std::vector<Entry> of_plugin;
  for (const auto& entry : list) {
    if (entry.plugin->name() == name && entry.parts.empty()) of_plugin.push_back(entry);
  }
  if (of_plugin.size() == 1) return of_plugin.front();
  std::string available;
  for (const auto& entry : list)
    available += (available.empty() ? "" : ", ") + std::string(entry.api->name);
  std::string message =
      std::string(what) + " names " + interface + " '" + std::string(name) + "', ";
  if (of_plugin.size() > 1) {
    message += "a plugin with " + std::to_string(of_plugin.size()) + " of them: name one. ";
  } else {
    const std::string suggestion = suggest();
    const bool ends_sentence =
        !suggestion.empty() && (suggestion.back() == '.' || suggestion.back() == '?');
    message += "which no loaded plugin provides" + (suggestion.empty() ? "" : "; " + suggestion) +
               (ends_sentence ? " " : ". ");
  }
  message += "Available: " + (available.empty() ? std::string("none") : available) + ".";
  for (const auto& rejection : discovery.rejected) {
    if (rejection.path.find("libchorus-" + std::string(name) + ".so") != std::string::npos) {
      message += " " + rejection.path + " was rejected: " + rejection.reason;
    }
  }
  // A plugin of that name was loaded, but its table for this interface was unusable.
  for (const auto& plugin : plugins) {
    if (plugin->name() != name) continue;
    for (const auto& note : plugin->notes()) {
      message += " Plugin " + plugin->name() + " (" + plugin->path() + "): " + note + ".";
    }
  }
  // Its plugin may be in a folder that could not be read.
  for (const auto& folder : discovery.unreadable_dirs) {
    message += " The plugin folder " + folder.path + " was skipped: " + folder.reason + ".";
  }
  throw Error(CHORUS_INVALID_ARGUMENT, message);
}

// What a user who named the collective `name`, which is not there, may have meant: an algorithm or
// a transport named alone (each runs only as ALGORITHM@TRANSPORT), an algorithm over a transport
// that is not loaded, or a close name; "" when nothing fits.
std::string CollectiveSuggestion(std::string_view name,
                                 const std::vector<Registry::CollectiveImplementation>& collectives,
                                 const std::vector<Registry::AlgorithmImplementation>& algorithms,
                                 const std::vector<Registry::TransportImplementation>& transports) {
  // The collectives algorithm@transport made of `algorithm` (core_ring as ring@tcp).
  const auto pairs_of = [&](std::string_view algorithm) {
    std::vector<std::string> pairs;
    for (const auto& entry : collectives) {
      const std::string_view collective = entry.api->name;
      if (entry.plugin->builtin() && collective == kCoreRingName && algorithm == "ring") {
        pairs.push_back(kCoreRingPairName);
      } else if (!entry.parts.empty() && collective.size() > algorithm.size() &&
                 collective.substr(0, algorithm.size()) == algorithm &&
                 collective[algorithm.size()] == '@') {
        pairs.push_back(std::string(collective));
      }
    }
    return pairs;
  };
  const auto is_algorithm = [&](std::string_view n) {
    return std::any_of(algorithms.begin(), algorithms.end(),
                       [&](const auto& a) { return n == a.api->name; });
  };
  // An algorithm named alone runs only over a transport.
  if (is_algorithm(name)) {
    const auto pairs = pairs_of(name);
    if (!pairs.empty()) {
      return std::string(name) + " is an algorithm: name it with a transport, " +
             ListOf(pairs, " or ") + ".";
    }
  }
  // An algorithm over a transport that is not loaded.
  const size_t at = name.find('@');
  if (at != std::string_view::npos && is_algorithm(name.substr(0, at))) {
    const auto pairs = pairs_of(name.substr(0, at));
    const bool transport_loaded =
        std::any_of(transports.begin(), transports.end(),
                    [&](const auto& t) { return name.substr(at + 1) == t.api->name; });
    if (!transport_loaded && !pairs.empty()) {
      const std::string closest = ClosestName(name, pairs);
      const std::string why = "no transport '" + std::string(name.substr(at + 1)) +
                              "' is loaded; " + std::string(name.substr(0, at)) + " runs as " +
                              ListOf(pairs, " or ");
      return closest.empty() ? why + "." : "did you mean " + closest + "? (" + why + ")";
    }
  }
  // A transport named alone carries the pairs of every algorithm.
  for (const auto& transport : transports) {
    if (name != transport.api->name) continue;
    std::vector<std::string> pairs;
    for (const auto& algorithm : algorithms) {
      for (const std::string& pair : pairs_of(algorithm.api->name)) {
        if (pair.substr(pair.find('@') + 1) == name) pairs.push_back(pair);
      }
    }
    if (!pairs.empty()) {
      return std::string(name) + " is a transport: name an algorithm over it, " +
             ListOf(pairs, " or ") + ".";
    }
  }
  std::vector<std::string> names;
  for (const auto& entry : collectives) names.push_back(entry.api->name);
  names.push_back(kCoreRingPairName);  // core_ring's other name
  return DidYouMean(name, names);
}

}  // namespace

Registry::CrossDeviceOpsImplementation Registry::FindCrossDeviceOps(std::string_view name,
                                                                    std::string_view what) const {
  return Find(cross_device_ops_, plugins_, discovery_, name, what, "cross-device ops",
              [&] { return DidYouMean(name, CrossDeviceOpsNames()); });
}

Registry::CollectiveImplementation Registry::FindCollective(std::string_view name,
                                                            std::string_view what) const {
  if (name == kCoreRingPairName) name = kCoreRingName;
  return Find(collectives_, plugins_, discovery_, name, what, "a collective",
              [&] { return CollectiveSuggestion(name, collectives_, algorithms_, transports_); });
}

Registry::TransportImplementation Registry::FindTransport(std::string_view name,
                                                          std::string_view what) const {
  std::vector<std::string> names;
  for (const auto& entry : transports_) names.push_back(entry.api->name);
  return Find(transports_, plugins_, discovery_, name, what, "a transport",
              [&] { return DidYouMean(name, names); });
}

std::shared_ptr<DeviceEnumerator> Registry::CpuDevices() const {
  return DeviceEnumerators().front();
}

std::vector<std::shared_ptr<DeviceEnumerator>> Registry::DeviceEnumerators() const {
  std::lock_guard<std::mutex> lock(enumerators_mutex_);
  auto create = [this](EnumeratorSlot& slot) {
    const std::string which =
        "devices '" + std::string(slot.api->platform) + "' of plugin " + slot.library->name();
    try {
      slot.enumerator = DeviceEnumerator::Create(slot.library, *slot.api, {}, device_job_);
      slot.failure.clear();
    } catch (const Error& e) {
      // Left out, with what it lacked logged once; tried again only for another job.
      Log().warn("{} are not used: {}", which, e.what());
      slot.failure = which + ": " + e.what();
      slot.failed_for_job = job_generation_;
    }
  };
  if (!enumerators_created_) {
    const uint32_t cpu_count = CpuDeviceCountFromEnvironment();
    EnumeratorSlot cpu{
        plugins_.front(),
        nullptr,
        DeviceEnumerator::Create(plugins_.front(), {{"count", std::to_string(cpu_count)}}),
        {},
        0};
    cpu.api = &cpu.enumerator->api();
    enumerators_.push_back(std::move(cpu));
    for (size_t i = 1; i < plugins_.size(); ++i) {
      for (const auto* api : plugins_[i]->device_enumerators()) {
        EnumeratorSlot slot{plugins_[i], api, nullptr, {}, 0};
        create(slot);
        enumerators_.push_back(std::move(slot));
      }
    }
    enumerators_created_ = true;
  }
  std::vector<std::shared_ptr<DeviceEnumerator>> enumerators;
  for (EnumeratorSlot& slot : enumerators_) {
    // Released and wanted again, or failed for an earlier job.
    if (!slot.enumerator && (slot.failure.empty() || slot.failed_for_job != job_generation_)) {
      create(slot);
    }
    if (slot.enumerator) enumerators.push_back(slot.enumerator);
  }
  return enumerators;
}

void Registry::ReleaseDeviceEnumerator(std::string_view platform) {
  DeviceEnumerators();
  std::lock_guard<std::mutex> lock(enumerators_mutex_);
  for (size_t i = 1; i < enumerators_.size(); ++i) {
    EnumeratorSlot& slot = enumerators_[i];
    if (platform != slot.api->platform) continue;
    if (slot.enumerator && slot.enumerator.use_count() > 1) {
      throw Error(CHORUS_UNAVAILABLE,
                  "the devices of platform '" + std::string(platform) + "' (plugin " +
                      slot.library->name() + ") are still in use (" +
                      std::to_string(slot.enumerator.use_count() - 1) +
                      " holders: strategies, variables or tensors on them); destroy them before "
                      "releasing the devices");
    }
    slot.enumerator.reset();
    return;
  }
  throw Error(CHORUS_NOT_FOUND,
              "no plugin device enumerator of platform '" + std::string(platform) + "' to release");
}

std::vector<std::string> Registry::DeviceEnumeratorFailures() const {
  std::lock_guard<std::mutex> lock(enumerators_mutex_);
  std::vector<std::string> failures;
  for (const EnumeratorSlot& slot : enumerators_) {
    if (!slot.failure.empty()) failures.push_back(slot.failure);
  }
  return failures;
}

void Registry::SetDeviceJob(std::shared_ptr<const DeviceJob> job) {
  std::lock_guard<std::mutex> lock(enumerators_mutex_);
  device_job_ = std::move(job);
  ++job_generation_;
}

std::vector<Device> Registry::DefaultDevices() const {
  std::vector<Device> accelerators, cpus;
  for (const auto& enumerator : DeviceEnumerators()) {
    for (uint32_t i = 0; i < enumerator->count(); ++i) {
      const auto kind = enumerator->info(i).kind;
      // One enumerator's accelerators: cross-device ops work within one enumerator.
      const bool same = accelerators.empty() || accelerators.front().enumerator == enumerator;
      if ((kind == CHORUS_DEVICE_GPU || kind == CHORUS_DEVICE_TPU) && same) {
        accelerators.push_back({enumerator, i});
      } else if (enumerator->library().builtin()) {
        cpus.push_back({enumerator, i});
      }
    }
  }
  return accelerators.empty() ? cpus : accelerators;
}

}  // namespace chorus
