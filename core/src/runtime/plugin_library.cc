#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/plugin_library.h>
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/dll/shared_library.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <type_traits>

#include "base/logging.h"
#include "base/signal_dispositions.h"
#include "base/watchdog.h"
#include "runtime/host.h"
#include "runtime/plugin_vetting.h"
#include "runtime/shared_object_check.h"

namespace chorus {

namespace {

std::atomic<bool> leave_loaded{false};

// Libraries left mapped at exit, reachable from here so that a leak checker does not report them.
std::vector<std::unique_ptr<boost::dll::shared_library>>& KeptMapped() {
  static auto* kept = new std::vector<std::unique_ptr<boost::dll::shared_library>>();
  return *kept;
}

// While a plugin file is opened in this process (dlopen, its entry point, its init), a fatal
// signal first prints which file was being opened, then goes to the handler that was there
// before (the default: the process dies as it would have). Loads are serialised by
// LibraryMutex(), so one message buffer serves.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
char g_opening_message[2048];
size_t g_opening_message_size = 0;
struct sigaction g_before_opening[NSIG];

extern "C" void OnFatalSignalWhileOpening(int signal, siginfo_t* info, void*) {
  [[maybe_unused]] ssize_t written = ::write(2, g_opening_message, g_opening_message_size);
  ::sigaction(signal, &g_before_opening[signal], nullptr);
  // Sent by kill(), raise() or abort(): send it again, to the previous handler. A fault returns,
  // and the faulting instruction meets the previous handler.
  if (info == nullptr || info->si_code <= 0) ::raise(signal);
}

class OpeningNotice {
 public:
  explicit OpeningNotice(const std::string& path) {
    const std::string name =
        PluginNameFromFileName(std::filesystem::path(path).filename().string());
    const std::string text =
        "[chorus] a fatal signal arrived while this process was opening the plugin file " + path +
        " (its libraries' constructors, chorus_plugin_get() or init()): the plugin crashed the "
        "process. Remove the file from the plugin folders" +
        (name.empty() ? std::string() : ", or leave it out with CHORUS_PLUGINS=^" + name) + "\n";
    g_opening_message_size = std::min(text.size(), sizeof g_opening_message);
    std::memcpy(g_opening_message, text.data(), g_opening_message_size);
    struct sigaction action {};
    action.sa_sigaction = OnFatalSignalWhileOpening;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int signal : kFatalSignals) ::sigaction(signal, &action, &g_before_opening[signal]);
  }
  ~OpeningNotice() {
    for (int signal : kFatalSignals) {
      struct sigaction now {};
      ::sigaction(signal, nullptr, &now);
      // Ours still: put the previous one back. Another (the plugin's) is left to
      // SignalDispositions, which reports it.
      if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == OnFatalSignalWhileOpening) {
        ::sigaction(signal, &g_before_opening[signal], nullptr);
      }
    }
  }
};

}  // namespace

struct PluginLibrary::Handle {
  std::unique_ptr<boost::dll::shared_library> library =
      std::make_unique<boost::dll::shared_library>();
  std::unique_ptr<internal::PluginHost> host;

  // Destroyed under LibraryMutex() (Guarded), so KeptMapped() needs no lock of its own.
  ~Handle() {
    host.reset();
    if (leave_loaded.load() && library->is_loaded()) KeptMapped().push_back(std::move(library));
  }
};

void PluginLibrary::LeaveLoadedFromNowOn() { leave_loaded.store(true); }

namespace {

std::string Version(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Copies a struct of the plugin's struct_size into the core's layout: fields the plugin did not
// have stay zero (unsupported), fields the core does not know are not read.
template <typename Struct>
std::unique_ptr<Struct> CopyStruct(const Struct* source) {
  auto target = std::make_unique<Struct>();
  std::memset(target.get(), 0, sizeof(Struct));
  std::memcpy(target.get(), source, std::min(source->struct_size, sizeof(Struct)));
  target->struct_size = sizeof(Struct);
  return target;
}

// The name an implementation goes by: a device enumerator's platform, else its name.
template <typename Api>
const char*& NameOf(Api* table) {
  if constexpr (std::is_same_v<Api, chorus_device_enumerator_api>) {
    return table->platform;
  } else {
    return table->name;
  }
}

// How many entries a NULL-terminated memory list may have before it is taken as unterminated.
constexpr size_t kMaxMemoryKinds = 64;

// Guards the one-library-per-file cache of Load, and is held while a library shuts down and
// unloads, so that a Load of the same file never runs the plugin's init while its shutdown runs
// (dlopen would hand back the library that is still mapped). Recursive: a library that fails
// Accept is destroyed inside Load.
std::recursive_mutex& LibraryMutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

std::shared_ptr<PluginLibrary> Guarded(PluginLibrary* library) {
  return std::shared_ptr<PluginLibrary>(library, [](PluginLibrary* dying) {
    std::lock_guard<std::recursive_mutex> lock(LibraryMutex());
    delete dying;
  });
}

}  // namespace

template <typename Api>
void PluginLibrary::AcceptInterface(const Api* single, const Api* const* list, size_t count,
                                    size_t required, const char* what, Copies<Api>* copies,
                                    std::vector<const Api*>* accepted) {
  std::vector<const Api*> offered;
  if (list != nullptr && count > 0) {
    offered.assign(list, list + count);
  } else if (single != nullptr) {
    offered.push_back(single);
  }
  std::set<std::string> names;
  for (size_t i = 0; i < offered.size(); ++i) {
    const std::string where =
        std::string(what) + (offered.size() > 1 ? " #" + std::to_string(i) : "");
    const Api* source = offered[i];
    if (source == nullptr) {
      notes_.push_back(where + " is NULL in its array; ignored");
      continue;
    }
    if (source->struct_size < required) {
      notes_.push_back(where + " table" +
                       (source->struct_size == 0
                            ? " has struct_size 0 (never set?)"
                            : " is " + std::to_string(source->struct_size) + " bytes") +
                       ", less than the " + std::to_string(required) +
                       " bytes a usable one needs; the interface is ignored (set struct_size to "
                       "sizeof the table, as plugin.h asks)");
      warnings_ = true;
      continue;
    }
    auto copy = CopyStruct(source);
    const char*& name = NameOf(copy.get());
    if (name == nullptr) {
      if (offered.size() > 1) {
        notes_.push_back(where + " has no name; a library of several must name each; ignored");
        continue;
      }
      name = std::is_same_v<Api, chorus_device_enumerator_api> ? "" : table_.name;
    }
    if (!names.insert(name).second) {
      notes_.push_back(where + " '" + name + "' repeats an earlier one's name; ignored");
      continue;
    }
    if constexpr (requires { copy->capabilities; }) AcceptCapabilities(copy.get(), what, copies);
    accepted->push_back(copy.get());
    copies->tables.push_back(std::move(copy));
  }
}

template <typename Api>
void PluginLibrary::AcceptCapabilities(Api* table, const char* what, Copies<Api>* copies) {
  const chorus_capabilities* source = table->capabilities;
  if (source == nullptr) return;
  table->capabilities = nullptr;  // unless the checks below pass
  const std::string where = std::string(what) + " '" + table->name + "'";
  if (source->struct_size < CHORUS_STRUCT_SIZE(chorus_capabilities, score)) {
    notes_.push_back(where + ": its capabilities are " + std::to_string(source->struct_size) +
                     " bytes, too few for ABI 1.1's; it is chosen only by name");
    return;
  }
  auto copy = CopyStruct(source);
  size_t kinds = 0;
  while (copy->memory != nullptr && kinds < kMaxMemoryKinds && copy->memory[kinds] != nullptr) {
    ++kinds;
  }
  std::string problem;
  if (copy->memory == nullptr || kinds == 0) {
    problem = "name no memory";
  } else if (kinds == kMaxMemoryKinds) {
    problem = "list memory without the NULL that ends the list";
  } else if (copy->score == nullptr) {
    problem = "have no score function";
  } else if (copy->shape != CHORUS_SHAPE_ANY && copy->shape != CHORUS_SHAPE_ONE_HOST &&
             copy->shape != CHORUS_SHAPE_UNIFORM) {
    problem = "name an unknown job shape " + std::to_string(copy->shape);
  }
  if (!problem.empty()) {
    notes_.push_back(where + ": its capabilities " + problem + "; it is chosen only by name");
    return;
  }
  table->capabilities = copy.get();
  copies->capabilities.push_back(std::move(copy));
}

void PluginLibrary::AcceptExtensions(const chorus_plugin* table) {
  if (table->struct_size < CHORUS_STRUCT_SIZE(chorus_plugin, extensions)) return;
  constexpr size_t kMaxExtensions = 256;  // a longer chain is taken for a loop
  for (const chorus_extension* e = table->extensions; e != nullptr; e = e->next) {
    if (extension_types_.size() == kMaxExtensions) {
      notes_.push_back("its extension chain is longer than " + std::to_string(kMaxExtensions) +
                       " (a loop?); the rest is ignored");
      break;
    }
    if (e->struct_size < sizeof(chorus_extension)) {
      notes_.push_back("an extension of " + std::to_string(e->struct_size) +
                       " bytes is smaller than chorus_extension; the chain ends there");
      break;
    }
    extension_types_.push_back(e->type);
    if (e->type == CHORUS_EXTENSION_DEVICE_PROGRAMS) AcceptDevicePrograms(e);
  }
  std::string unknown;
  for (uint32_t type : extension_types_) {
    if (type == CHORUS_EXTENSION_DEVICE_PROGRAMS) continue;
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", type);
    unknown += (unknown.empty() ? "" : ", ") + std::string(hex);
  }
  if (!unknown.empty())
    notes_.push_back("extensions " + unknown + " are unknown to this core and skipped");
}

void PluginLibrary::AcceptDevicePrograms(const chorus_extension* extension) {
  constexpr size_t kRequired = CHORUS_STRUCT_SIZE(chorus_device_programs_extension, destroy);
  if (extension->struct_size < kRequired) {
    notes_.push_back("its device programs extension has " + std::to_string(extension->struct_size) +
                     " bytes, fewer than the " + std::to_string(kRequired) +
                     " of ABI 1.4; it is ignored");
    return;
  }
  auto copy = std::make_unique<chorus_device_programs_extension>();
  std::memcpy(copy.get(), extension, std::min(extension->struct_size, sizeof *copy));
  copy->base.struct_size = sizeof *copy;
  copy->base.next = nullptr;
  if (copy->platform == nullptr || copy->compile == nullptr || copy->signature == nullptr ||
      copy->execute == nullptr || copy->destroy == nullptr) {
    notes_.push_back("its device programs extension lacks a platform or a function; it is ignored");
    return;
  }
  device_programs_.push_back(std::move(copy));
}

const chorus_device_programs_extension* PluginLibrary::device_programs(
    std::string_view platform) const {
  for (const auto& extension : device_programs_) {
    if (platform == extension->platform) return extension.get();
  }
  return nullptr;
}

PluginLibrary::~PluginLibrary() {
  if (initialized_ && table_.shutdown != nullptr) table_.shutdown();
}

std::shared_ptr<PluginLibrary> PluginLibrary::Load(const std::string& path, std::string* reason) {
  // One PluginLibrary per file: dlopen would hand back the same library, whose init must not run
  // twice (its host slot is one per library).
  static std::map<std::string, std::weak_ptr<PluginLibrary>> alive;
  std::error_code canonical_error;
  const std::string key = std::filesystem::canonical(path, canonical_error).string();
  std::lock_guard<std::recursive_mutex> lock(LibraryMutex());
  if (!canonical_error) {
    if (auto existing = alive[key].lock()) return existing;
  }
  auto plugin = LoadFile(path, reason);
  if (plugin != nullptr && !canonical_error) alive[key] = plugin;
  return plugin;
}

std::shared_ptr<PluginLibrary> PluginLibrary::LoadFile(const std::string& path,
                                                       std::string* reason) {
  // The one check of a candidate file, before dlopen: dlopen maps whatever the headers say, and
  // a truncated or foreign file kills the process inside it (see shared_object_check.h).
  if (std::string problem = internal::CheckSharedObject(path); !problem.empty()) {
    *reason = std::move(problem);
    return nullptr;
  }
  // Tried in a child process first (runtime/plugin_vetting.h): a file that crashes or hangs
  // there is not opened here.
  if (auto rejected = internal::VetPluginFiles({path}); !rejected.empty()) {
    *reason = rejected.begin()->second;
    return nullptr;
  }
  Log().debug("opening plugin file {}", path);
  // Opening runs the plugin's code: its libraries' constructors, its entry point, its init. None
  // of it may change how this process handles signals, crash it without naming the file, or
  // hang it.
  const internal::SignalDispositions dispositions = internal::SignalDispositions::Take();
  std::shared_ptr<PluginLibrary> plugin;
  {
    OpeningNotice notice(path);
    auto watch = internal::Watch(
        internal::PluginLoadTimeout(), std::chrono::milliseconds(1000),
        [&] { return "opening the plugin file " + path + " (CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS)"; },
        [](const std::string& message) { Log().error("{}", message); });
    plugin = Open(path, reason);
  }
  const std::string restored = dispositions.RestoreChanged(OnFatalSignalWhileOpening);
  if (!restored.empty() && plugin != nullptr) {
    plugin->notes_.push_back("opening it changed how this process handles " + restored +
                             " (a library it uses installs handlers of its own); chorus put the "
                             "previous handling back, so these signals keep their meaning");
    Log().info("plugin {} ({}): {}", plugin->name(), path, plugin->notes_.back());
  }
  return plugin;
}

std::shared_ptr<PluginLibrary> PluginLibrary::Open(const std::string& path, std::string* reason) {
  std::shared_ptr<PluginLibrary> plugin = Guarded(new PluginLibrary());
  plugin->path_ = path;
  plugin->handle_ = std::make_unique<Handle>();
  boost::dll::fs::error_code ec;
  dlerror();  // clear
  plugin->handle_->library->load(
      path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* detail = dlerror();
    *reason = std::string("cannot be loaded as a shared library: ") +
              (detail ? detail : ec.message()) +
              " (rebuild it for this machine, or remove it from the plugin folders)";
    return nullptr;
  }
  if (!plugin->handle_->library->has(CHORUS_PLUGIN_ENTRY_SYMBOL)) {
    *reason = std::string("does not export ") + CHORUS_PLUGIN_ENTRY_SYMBOL +
              "(); it is not a chorus plugin, or was built without chorus_add_plugin() (the "
              "symbol must have default visibility and C linkage)";
    return nullptr;
  }
  auto entry = plugin->handle_->library->get<const chorus_plugin*(const chorus_host*)>(
      CHORUS_PLUGIN_ENTRY_SYMBOL);
  const chorus_plugin* table = nullptr;
  try {
    table = entry(CoreHost());
  } catch (const std::exception& e) {
    *reason = std::string(CHORUS_PLUGIN_ENTRY_SYMBOL) +
              "() threw a C++ exception across the C ABI: " + e.what() +
              " (a plugin must catch everything; see chorus::sdk::Guard)";
    return nullptr;
  } catch (...) {
    *reason = std::string(CHORUS_PLUGIN_ENTRY_SYMBOL) +
              "() threw an exception across the C ABI (a plugin must catch everything; see "
              "chorus::sdk::Guard)";
    return nullptr;
  }
  if (!plugin->Accept(table, reason)) return nullptr;
  return plugin;
}

std::shared_ptr<PluginLibrary> PluginLibrary::FromBuiltinTable(const chorus_plugin* table,
                                                               std::string* reason) {
  std::shared_ptr<PluginLibrary> plugin = Guarded(new PluginLibrary());
  plugin->path_ = "builtin";
  plugin->builtin_ = true;
  plugin->handle_ = std::make_unique<Handle>();
  if (!plugin->Accept(table, reason)) return nullptr;
  return plugin;
}

bool PluginLibrary::Accept(const chorus_plugin* table, std::string* reason) {
  if (table == nullptr) {
    *reason = std::string(CHORUS_PLUGIN_ENTRY_SYMBOL) +
              "() returned NULL: the plugin says it cannot run here (set CHORUS_LOG_LEVEL=debug "
              "for its reasons)";
    return false;
  }
  if (table->struct_size < offsetof(chorus_plugin, abi_minor) + sizeof(uint32_t)) {
    *reason = "its chorus_plugin table is " + std::to_string(table->struct_size) +
              " bytes, too small to hold an ABI version; it is not a chorus plugin";
    return false;
  }
  const uint32_t major = table->abi_major;
  const uint32_t minor = table->abi_minor;
  if (major != CHORUS_ABI_MAJOR) {
    *reason = "built for chorus ABI " + Version(major, minor) + ", but this core speaks ABI " +
              Version(CHORUS_ABI_MAJOR, CHORUS_ABI_MINOR) +
              " and major versions must match: rebuild the plugin against the chorus " +
              std::to_string(CHORUS_ABI_MAJOR) + ".x SDK, or use a chorus of ABI major " +
              std::to_string(major);
    return false;
  }
  if (table->struct_size < CHORUS_PLUGIN_MIN_SIZE) {
    *reason = "its chorus_plugin table is " + std::to_string(table->struct_size) +
              " bytes, less than the " + std::to_string(CHORUS_PLUGIN_MIN_SIZE) +
              " bytes of ABI 1.0's required fields; rebuild it with the chorus SDK's plugin.h";
    return false;
  }
  std::memcpy(&table_, table, std::min(table->struct_size, sizeof(chorus_plugin)));
  if (table->struct_size < sizeof(chorus_plugin)) {
    std::memset(reinterpret_cast<char*>(&table_) + table->struct_size, 0,
                sizeof(chorus_plugin) - table->struct_size);
  }
  table_.struct_size = sizeof(chorus_plugin);

  static const std::regex kNamePattern("[a-z0-9_-]+");
  if (table_.name == nullptr || !std::regex_match(table_.name, kNamePattern)) {
    *reason = std::string("its name '") + (table_.name ? table_.name : "(null)") +
              "' is not a plugin name ([a-z0-9_-]+)";
    return false;
  }
  name_ = table_.name;
  if (!builtin_) {
    const std::string file = std::filesystem::path(path_).filename().string();
    const std::string expected = "libchorus-" + name_ + ".so";
    if (file.rfind("libchorus-", 0) == 0 && file != expected) {
      *reason = "the file is named " + file + " but the plugin calls itself '" + name_ +
                "'; rename the file to " + expected + " so CHORUS_PLUGINS names match";
      return false;
    }
  }
  struct Slot {
    const void* pointer;
    const char* name;
  };
  for (const Slot& slot :
       {Slot{reinterpret_cast<const void*>(table_.init), "init"},
        Slot{reinterpret_cast<const void*>(table_.shutdown), "shutdown"},
        Slot{reinterpret_cast<const void*>(table_.last_error), "last_error"},
        Slot{reinterpret_cast<const void*>(table_.request_test), "request_test"},
        Slot{reinterpret_cast<const void*>(table_.request_wait), "request_wait"},
        Slot{reinterpret_cast<const void*>(table_.request_free), "request_free"}}) {
    if (slot.pointer == nullptr) {
      *reason = std::string("its table leaves the required function '") + slot.name +
                "' NULL; the plugin is incomplete";
      return false;
    }
  }
  version_ = table_.version ? table_.version : "";
  description_ = table_.description ? table_.description : "";
  if (minor > CHORUS_ABI_MINOR) {
    notes_.push_back("built for ABI " + Version(major, minor) + ", newer than the core's " +
                     Version(CHORUS_ABI_MAJOR, CHORUS_ABI_MINOR) + ": using the " +
                     Version(CHORUS_ABI_MAJOR, CHORUS_ABI_MINOR) + " fields");
  } else if (table->struct_size < sizeof(chorus_plugin)) {
    notes_.push_back("built for ABI " + Version(major, minor) + " with a " +
                     std::to_string(table->struct_size) + "-byte table: slots past it are " +
                     "treated as unsupported");
  }

  // Interfaces, each through the same size check: one table per implementation, from the 1.1
  // arrays when the plugin gives them, else from the single pointer. A table too small for its
  // functions is ignored with a note, never called.
  const auto has = [&](size_t field_end) { return table->struct_size >= field_end; };
  AcceptInterface(
      table_.device_enumerator,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_device_enumerators)) ? table->device_enumerator_list
                                                                     : nullptr,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_device_enumerators)) ? table->num_device_enumerators
                                                                     : 0,
      CHORUS_STRUCT_SIZE(chorus_device_enumerator_api, device_info), "device_enumerator",
      &device_enumerator_copies_, &device_enumerator_list_);
  AcceptInterface(
      table_.cross_device_ops,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_cross_device_ops)) ? table->cross_device_ops_list
                                                                   : nullptr,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_cross_device_ops)) ? table->num_cross_device_ops
                                                                   : 0,
      CHORUS_STRUCT_SIZE(chorus_cross_device_ops_api, reduce), "cross_device_ops",
      &cross_device_ops_copies_, &cross_device_ops_list_);
  AcceptInterface(
      table_.collective,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_collectives)) ? table->collective_list : nullptr,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_collectives)) ? table->num_collectives : 0,
      CHORUS_STRUCT_SIZE(chorus_collective_api, destroy), "collective", &collective_copies_,
      &collective_list_);
  AcceptInterface(
      table_.algorithm,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_algorithms)) ? table->algorithm_list : nullptr,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_algorithms)) ? table->num_algorithms : 0,
      CHORUS_STRUCT_SIZE(chorus_algorithm_api, run), "algorithm", &algorithm_copies_,
      &algorithm_list_);
  AcceptInterface(
      table_.transport,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_transports)) ? table->transport_list : nullptr,
      has(CHORUS_STRUCT_SIZE(chorus_plugin, num_transports)) ? table->num_transports : 0,
      CHORUS_STRUCT_SIZE(chorus_transport_api, irecv), "transport", &transport_copies_,
      &transport_list_);
  // The table as the core knows it points at the first accepted implementation of each, and
  // its arrays at the accepted ones.
  table_.device_enumerator = device_enumerator_list_.empty() ? nullptr : device_enumerator_list_[0];
  table_.cross_device_ops = cross_device_ops_list_.empty() ? nullptr : cross_device_ops_list_[0];
  table_.collective = collective_list_.empty() ? nullptr : collective_list_[0];
  table_.algorithm = algorithm_list_.empty() ? nullptr : algorithm_list_[0];
  table_.transport = transport_list_.empty() ? nullptr : transport_list_[0];
  table_.device_enumerator_list = device_enumerator_list_.data();
  table_.num_device_enumerators = device_enumerator_list_.size();
  table_.cross_device_ops_list = cross_device_ops_list_.data();
  table_.num_cross_device_ops = cross_device_ops_list_.size();
  table_.collective_list = collective_list_.data();
  table_.num_collectives = collective_list_.size();
  table_.algorithm_list = algorithm_list_.data();
  table_.num_algorithms = algorithm_list_.size();
  table_.transport_list = transport_list_.data();
  table_.num_transports = transport_list_.size();
  AcceptExtensions(table);

  handle_->host = std::make_unique<internal::PluginHost>(name_);
  chorus_status status = CHORUS_INTERNAL;
  try {
    status = table_.init(handle_->host->host());
  } catch (...) {
    *reason = "its init() threw an exception across the C ABI (a plugin must catch everything)";
    return false;
  }
  if (status != CHORUS_OK) {
    *reason = std::string("its init() failed with ") + StatusName(status) + ": " + LastError();
    return false;
  }
  initialized_ = true;
  // A table the core had to ignore is a broken plugin: warn. Other notes are for chorus-info.
  for (const auto& note : notes_) {
    if (warnings_) {
      Log().warn("plugin {} ({}): {}", name_, path_, note);
    } else {
      Log().info("plugin {} ({}): {}", name_, path_, note);
    }
  }
  return true;
}

const chorus_device_enumerator_api* PluginLibrary::device_enumerator() const {
  return table_.device_enumerator;
}
const chorus_cross_device_ops_api* PluginLibrary::cross_device_ops() const {
  return table_.cross_device_ops;
}
const chorus_collective_api* PluginLibrary::collective() const { return table_.collective; }
const chorus_algorithm_api* PluginLibrary::algorithm() const { return table_.algorithm; }
const chorus_transport_api* PluginLibrary::transport() const { return table_.transport; }

std::vector<std::string> PluginLibrary::Provides() const {
  std::vector<std::string> out;
  for (auto* t : device_enumerator_list_) {
    out.push_back(std::string("device_enumerator(") + t->platform + ")");
  }
  for (auto* t : cross_device_ops_list_) {
    out.push_back(std::string("cross_device_ops(") + t->name + ")");
  }
  for (auto* t : collective_list_) out.push_back(std::string("collective(") + t->name + ")");
  for (auto* t : algorithm_list_) out.push_back(std::string("algorithm(") + t->name + ")");
  for (auto* t : transport_list_) out.push_back(std::string("transport(") + t->name + ")");
  return out;
}

std::string PluginLibrary::LastError() const {
  if (table_.last_error == nullptr) return "";
  const char* message = table_.last_error();
  return message ? message : "";
}

}  // namespace chorus
