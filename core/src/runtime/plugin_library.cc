#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/runtime/plugin_library.h>
#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <filesystem>
#include <regex>

#include "base/logging.h"
#include "runtime/host.h"

namespace chorus {

struct PluginLibrary::Handle {
  boost::dll::shared_library library;  // unloaded last (declared first)
  std::unique_ptr<internal::PluginHost> host;
};

namespace {

std::string Version(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Copies a table of the plugin's struct_size into the core's layout: fields the plugin did not
// have stay zero (unsupported), fields the core does not know are not read.
template <typename Table>
bool CopyTable(const Table* source, Table* target, size_t required, const char* what,
               std::vector<std::string>* notes) {
  if (source == nullptr) return false;
  if (source->struct_size < required) {
    notes->push_back(std::string(what) + " table is " + std::to_string(source->struct_size) +
                     " bytes, less than the " + std::to_string(required) +
                     " a usable one needs; the interface is ignored");
    return false;
  }
  std::memset(target, 0, sizeof(Table));
  std::memcpy(target, source, std::min(source->struct_size, sizeof(Table)));
  target->struct_size = sizeof(Table);
  return true;
}

}  // namespace

PluginLibrary::~PluginLibrary() {
  if (initialized_ && table_.shutdown != nullptr) table_.shutdown();
}

std::shared_ptr<PluginLibrary> PluginLibrary::Load(const std::string& path, std::string* reason) {
  std::shared_ptr<PluginLibrary> plugin(new PluginLibrary());
  plugin->path_ = path;
  plugin->handle_ = std::make_unique<Handle>();
  std::error_code exists_error;
  if (!std::filesystem::is_regular_file(path, exists_error)) {
    *reason = "no such file (check the path in CHORUS_PLUGINS or CHORUS_PLUGIN_PATH)";
    return nullptr;
  }
  boost::dll::fs::error_code ec;
  dlerror();  // clear
  plugin->handle_->library.load(
      path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* detail = dlerror();
    *reason = std::string("cannot be loaded as a shared library: ") +
              (detail ? detail : ec.message()) +
              " (rebuild it for this machine, or remove it from the plugin folders)";
    return nullptr;
  }
  if (!plugin->handle_->library.has(CHORUS_PLUGIN_ENTRY_SYMBOL)) {
    *reason = std::string("does not export ") + CHORUS_PLUGIN_ENTRY_SYMBOL +
              "(); it is not a chorus plugin, or was built without chorus_add_plugin() (the "
              "symbol must have default visibility and C linkage)";
    return nullptr;
  }
  auto entry = plugin->handle_->library.get<const chorus_plugin*(const chorus_host*)>(
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
  std::shared_ptr<PluginLibrary> plugin(new PluginLibrary());
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

  // Interfaces, each through the same size check. A table too small for its functions is
  // ignored with a note, never called.
  const bool have_enumerator = CopyTable(
      table_.device_enumerator, &device_enumerator_,
      CHORUS_STRUCT_SIZE(chorus_device_enumerator_api, device_info), "device_enumerator", &notes_);
  const bool have_cdo = CopyTable(table_.cross_device_ops, &cross_device_ops_,
                                  CHORUS_STRUCT_SIZE(chorus_cross_device_ops_api, reduce),
                                  "cross_device_ops", &notes_);
  const bool have_collective =
      CopyTable(table_.collective, &collective_, CHORUS_STRUCT_SIZE(chorus_collective_api, destroy),
                "collective", &notes_);
  const bool have_algorithm =
      CopyTable(table_.algorithm, &algorithm_, CHORUS_STRUCT_SIZE(chorus_algorithm_api, run),
                "algorithm", &notes_);
  const bool have_transport =
      CopyTable(table_.transport, &transport_, CHORUS_STRUCT_SIZE(chorus_transport_api, irecv),
                "transport", &notes_);
  table_.device_enumerator = have_enumerator ? &device_enumerator_ : nullptr;
  table_.cross_device_ops = have_cdo ? &cross_device_ops_ : nullptr;
  table_.collective = have_collective ? &collective_ : nullptr;
  table_.algorithm = have_algorithm ? &algorithm_ : nullptr;
  table_.transport = have_transport ? &transport_ : nullptr;
  if (have_enumerator && device_enumerator_.platform == nullptr) device_enumerator_.platform = "";
  if (have_cdo && cross_device_ops_.name == nullptr) cross_device_ops_.name = table_.name;
  if (have_collective && collective_.name == nullptr) collective_.name = table_.name;
  if (have_algorithm && algorithm_.name == nullptr) algorithm_.name = table_.name;
  if (have_transport && transport_.name == nullptr) transport_.name = table_.name;

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
  for (const auto& note : notes_) Log().info("plugin {} ({}): {}", name_, path_, note);
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
  if (auto* t = device_enumerator())
    out.push_back(std::string("device_enumerator(") + t->platform + ")");
  if (auto* t = cross_device_ops()) out.push_back(std::string("cross_device_ops(") + t->name + ")");
  if (auto* t = collective()) out.push_back(std::string("collective(") + t->name + ")");
  if (auto* t = algorithm()) out.push_back(std::string("algorithm(") + t->name + ")");
  if (auto* t = transport()) out.push_back(std::string("transport(") + t->name + ")");
  return out;
}

std::string PluginLibrary::LastError() const {
  if (table_.last_error == nullptr) return "";
  const char* message = table_.last_error();
  return message ? message : "";
}

}  // namespace chorus
