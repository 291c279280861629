// One loaded plugin: a shared library (or a table compiled into the core) whose chorus_plugin
// table was accepted. Keeps the library loaded while any shared_ptr to it lives; every object
// made from a plugin holds one. A library is loaded and initialised once per process: loading
// the same file again gives the same PluginLibrary while one is alive.
#ifndef CHORUS_PLUGIN_LIBRARY_H_
#define CHORUS_PLUGIN_LIBRARY_H_

#include <chorus/plugin.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

class PluginLibrary {
 public:
  // Loads `path` (RTLD_NOW | RTLD_LOCAL), negotiates the ABI and calls init, or returns the
  // PluginLibrary of that file already alive in this process. On failure returns nullptr and
  // sets *reason to a sentence that names the problem and the fix.
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

  // The plugin's table as the core knows it (this core's ABI layout): fields the plugin's
  // struct_size did not cover are zero. Every implementation of an interface is such a copy too,
  // with its capabilities (1.1) copied and checked: a table whose capabilities are unusable keeps
  // none (it is then chosen only by name), with a note saying why.
  const chorus_plugin& table() const { return table_; }
  const std::vector<const chorus_device_enumerator_api*>& device_enumerators() const {
    return device_enumerator_list_;
  }
  const std::vector<const chorus_cross_device_ops_api*>& cross_device_ops_list() const {
    return cross_device_ops_list_;
  }
  const std::vector<const chorus_collective_api*>& collectives() const { return collective_list_; }
  const std::vector<const chorus_algorithm_api*>& algorithms() const { return algorithm_list_; }
  const std::vector<const chorus_transport_api*>& transports() const { return transport_list_; }
  // The first implementation of each interface, or nullptr when it provides none.
  const chorus_device_enumerator_api* device_enumerator() const;
  const chorus_cross_device_ops_api* cross_device_ops() const;
  const chorus_collective_api* collective() const;
  const chorus_algorithm_api* algorithm() const;
  const chorus_transport_api* transport() const;

  // The types of the extensions on its chain (1.1), in order.
  const std::vector<uint32_t>& extension_types() const { return extension_types_; }
  // Its device programs extension (1.4) for the enumerator of `platform`, or nullptr. A copy in
  // the core's layout (fields past the plugin's struct_size are NULL).
  const chorus_device_programs_extension* device_programs(std::string_view platform) const;

  // What the plugin provides, e.g. {"device_enumerator(cpu)",
  // "cross_device_ops(hierarchical_copy)"}, one entry per implementation.
  std::vector<std::string> Provides() const;

  // The calling thread's last error in this plugin ("" if none).
  std::string LastError() const;

  // Logged notes from negotiation (e.g. "ABI 1.3 is newer than the core's 1.0: ...").
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  // Registry::Global() calls LeaveLoadedFromNowOn when the process begins to exit.
  friend class Registry;
  // From this call on, a library that is released is still shut down (its shutdown() runs) but
  // stays mapped: the process is exiting. Threads may still run a plugin's code then, and a
  // dlclose at exit races them; the process's end unmaps everything anyway.
  static void LeaveLoadedFromNowOn();

  PluginLibrary() = default;
  static std::shared_ptr<PluginLibrary> LoadFile(const std::string& path, std::string* reason);
  static std::shared_ptr<PluginLibrary> Open(const std::string& path, std::string* reason);
  bool Accept(const chorus_plugin* table, std::string* reason);

  // Copies of the plugin's interface tables and capabilities, in the core's layout; stable
  // addresses (the lists point into them).
  template <typename Api>
  struct Copies {
    std::vector<std::unique_ptr<Api>> tables;
    std::vector<std::unique_ptr<chorus_capabilities>> capabilities;
  };
  template <typename Api>
  void AcceptInterface(const Api* single, const Api* const* list, size_t count, size_t required,
                       const char* what, Copies<Api>* copies, std::vector<const Api*>* accepted);
  template <typename Api>
  void AcceptCapabilities(Api* table, const char* what, Copies<Api>* copies);
  void AcceptExtensions(const chorus_plugin* table);
  void AcceptDevicePrograms(const chorus_extension* extension);

  struct Handle;
  std::unique_ptr<Handle> handle_;  // the loaded library; null for builtins
  std::string name_, path_, version_, description_;
  bool builtin_ = false;
  bool initialized_ = false;
  chorus_plugin table_{};
  Copies<chorus_device_enumerator_api> device_enumerator_copies_;
  Copies<chorus_cross_device_ops_api> cross_device_ops_copies_;
  Copies<chorus_collective_api> collective_copies_;
  Copies<chorus_algorithm_api> algorithm_copies_;
  Copies<chorus_transport_api> transport_copies_;
  std::vector<const chorus_device_enumerator_api*> device_enumerator_list_;
  std::vector<const chorus_cross_device_ops_api*> cross_device_ops_list_;
  std::vector<const chorus_collective_api*> collective_list_;
  std::vector<const chorus_algorithm_api*> algorithm_list_;
  std::vector<const chorus_transport_api*> transport_list_;
  std::vector<uint32_t> extension_types_;
  std::vector<std::unique_ptr<chorus_device_programs_extension>> device_programs_;
  std::vector<std::string> notes_;
  bool warnings_ = false;  // a note says a table was ignored
};

// The chorus_host the core hands every plugin (logger, abort flag, allocator, host kernels).
const chorus_host* CoreHost();
// Raises the process-wide abort flag: every plugin's long wait, on every thread, returns
// CHORUS_ABORTED, and the core's own waits end. For a process that is stopping (a handler of
// SIGTERM may call it: it only stores an atomic flag). It cannot be lowered again.
void RequestAbort();

}  // namespace chorus

#endif  // CHORUS_PLUGIN_LIBRARY_H_
