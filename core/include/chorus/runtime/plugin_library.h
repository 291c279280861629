// One loaded plugin: a shared library (or a table compiled into the core) whose chorus_plugin
// table was accepted. Keeps the library loaded while any shared_ptr to it lives; every object
// made from a plugin holds one.
#ifndef CHORUS_PLUGIN_LIBRARY_H_
#define CHORUS_PLUGIN_LIBRARY_H_

#include <chorus/plugin.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus {

class PluginLibrary {
 public:
  // Loads `path` (RTLD_NOW | RTLD_LOCAL), negotiates the ABI and calls init. On failure returns
  // nullptr and sets *reason to a sentence that names the problem and the fix.
  static std::shared_ptr<PluginLibrary> Load(const std::string& path, std::string* reason);

  // Wraps a table compiled into the core ("builtin"); it goes through the same negotiation.
  static std::shared_ptr<PluginLibrary> FromBuiltinTable(const chorus_plugin* table,
                                                         std::string* reason);

  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }  // "builtin" for the core's own
  bool builtin() const { return builtin_; }
  uint32_t abi_major() const { return table_.abi_major; }
  uint32_t abi_minor() const { return table_.abi_minor; }
  const std::string& version() const { return version_; }
  const std::string& description() const { return description_; }

  // The plugin's table as the core knows it (ABI 1.0 layout): fields the plugin's struct_size
  // did not cover are zero. The interface getters return such copies too, or nullptr when the
  // plugin does not provide the interface.
  const chorus_plugin& table() const { return table_; }
  const chorus_device_enumerator_api* device_enumerator() const;
  const chorus_cross_device_ops_api* cross_device_ops() const;
  const chorus_collective_api* collective() const;
  const chorus_algorithm_api* algorithm() const;
  const chorus_transport_api* transport() const;

  // What the plugin provides, e.g. {"device_enumerator(cpu)",
  // "cross_device_ops(hierarchical_copy)"}.
  std::vector<std::string> Provides() const;

  // The calling thread's last error in this plugin ("" if none).
  std::string LastError() const;

  // Logged notes from negotiation (e.g. "ABI 1.3 is newer than the core's 1.0: ...").
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  PluginLibrary() = default;
  bool Accept(const chorus_plugin* table, std::string* reason);

  struct Handle;
  std::unique_ptr<Handle> handle_;  // the loaded library; null for builtins
  std::string name_, path_, version_, description_;
  bool builtin_ = false;
  bool initialized_ = false;
  chorus_plugin table_{};
  chorus_device_enumerator_api device_enumerator_{};
  chorus_cross_device_ops_api cross_device_ops_{};
  chorus_collective_api collective_{};
  chorus_algorithm_api algorithm_{};
  chorus_transport_api transport_{};
  std::vector<std::string> notes_;
};

// The chorus_host the core hands every plugin (logger, abort flag, allocator, host kernels).
const chorus_host* CoreHost();
// Raises the host's abort flag (plugins' long waits return CHORUS_ABORTED).
void RequestAbort();

}  // namespace chorus

#endif  // CHORUS_PLUGIN_LIBRARY_H_
