// Loading a PJRT C API plugin and driving its client: which library (the variables), its API
// version, the client's options, its devices, and buffers copied to and from the host. Every
// PJRT error becomes a chorus::Error carrying the plugin's own message; every wait has a time-out.
#ifndef CHORUS_PLUGINS_TPU_PJRT_CLIENT_H_
#define CHORUS_PLUGINS_TPU_PJRT_CLIENT_H_

#include <chorus/plugin.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt_abi.h"

namespace chorus::tpu {

// Which PJRT plugin to load and why that one.
struct PjrtPluginChoice {
  std::string path;  // handed to dlopen: a path, or "libtpu.so" for the loader's search
  std::string
      source;  // "CHORUS_PJRT_PLUGIN", "TPU_LIBRARY_PATH" or "libtpu.so on the loader's path"
};

// CHORUS_PJRT_PLUGIN (a path, or "reference" for chorus's reference plugin), else
// TPU_LIBRARY_PATH (as JAX reads it), else libtpu.so if the dynamic loader finds it. None of the
// three: chorus::Error NOT_FOUND naming all three. `reference_path` is where "reference" points.
PjrtPluginChoice ChoosePjrtPlugin(const std::string& reference_path);

// Where chorus's reference PJRT plugin is, found from the module this code is in (the tpu plugin
// in lib/chorus/plugins, or a program in bin/): lib/chorus/pjrt/libchorus-pjrt-reference.so.
std::string ReferencePjrtPluginPath();

// One client option, as PJRT's named values carry it.
struct PjrtOption {
  std::string name;
  pjrt::PJRT_NamedValue_Type type = pjrt::PJRT_NamedValue_kString;
  std::string string_value;
  int64_t int64_value = 0;
  std::vector<int64_t> int64_list;
  float float_value = 0;
  bool bool_value = false;
  bool omit = false;  // "name=": pass no option of this name (not even one chorus would add)
};

// CHORUS_PJRT_OPTIONS: "name=value,..." where a value is an integer, a float (with a '.'),
// true/false, a list of integers in brackets ("visible_devices=[0;1]", ';' between them), or else
// a string; an empty value ("node_id=") passes no option of that name, not even the node_id and
// num_nodes chorus adds for a job of several hosts. A malformed entry is chorus::Error
// INVALID_ARGUMENT naming it.
std::vector<PjrtOption> ParsePjrtOptions(std::string_view text);

// A loaded PJRT plugin library. Open checks, in this order, with an error naming the path: the
// library loads, it exports GetPjrtApi, GetPjrtApi returns a table, the API major version is
// chorus's (0), the minor version and the table length reach what chorus calls; then it calls
// PJRT_Plugin_Initialize. The library stays loaded for the process (plugins keep threads).
class PjrtLibrary {
 public:
  static std::shared_ptr<PjrtLibrary> Open(const PjrtPluginChoice& choice);

  const pjrt::PJRT_Api& api() const { return *api_; }
  const std::string& path() const { return choice_.path; }
  const std::string& source() const { return choice_.source; }
  int major_version() const { return api_->pjrt_api_version.major_version; }
  int minor_version() const { return api_->pjrt_api_version.minor_version; }

  // Throws chorus::Error for a non-null PJRT error, with `what` and the plugin's message, and
  // frees the error. A null error returns.
  void Check(pjrt::PJRT_Error* error, std::string_view what) const;
  // Waits up to `timeout` for `event`, destroys it, and throws as Check for its error; TIMEOUT
  // (naming `what`) when it is not ready by then. `keep_alive` is held until the plugin reports
  // the event, even past a time-out: memory the plugin may still write.
  void Await(pjrt::PJRT_Event* event, std::chrono::milliseconds timeout, std::string_view what,
             std::shared_ptr<void> keep_alive = nullptr) const;

 private:
  PjrtLibrary(PjrtPluginChoice choice, const pjrt::PJRT_Api* api)
      : choice_(std::move(choice)), api_(api) {}
  PjrtPluginChoice choice_;
  const pjrt::PJRT_Api* api_;
};

struct PjrtDevice {
  pjrt::PJRT_Device* handle = nullptr;
  int id = 0;
  int local_hardware_id = -1;
  int process_index = 0;
  std::string kind;
  std::vector<int64_t> coords;  // the "coords" attribute, empty when the plugin gives none
};

class PjrtClient;

// An immutable device array; destroyed with its owner.
class PjrtBuffer {
 public:
  PjrtBuffer() = default;
  PjrtBuffer(std::shared_ptr<PjrtLibrary> library, pjrt::PJRT_Buffer* handle)
      : library_(std::move(library)), handle_(handle) {}
  PjrtBuffer(PjrtBuffer&& other) noexcept { *this = std::move(other); }
  PjrtBuffer& operator=(PjrtBuffer&& other) noexcept;
  ~PjrtBuffer() { Reset(); }
  pjrt::PJRT_Buffer* handle() const { return handle_; }
  size_t size_in_bytes() const;
  void Reset();

 private:
  std::shared_ptr<PjrtLibrary> library_;
  pjrt::PJRT_Buffer* handle_ = nullptr;
};

// A compiled program loaded on the client's devices (PJRT_LoadedExecutable); destroyed with its
// owner.
class PjrtExecutable {
 public:
  PjrtExecutable(std::shared_ptr<PjrtLibrary> library, pjrt::PJRT_LoadedExecutable* handle,
                 size_t num_outputs)
      : library_(std::move(library)), handle_(handle), num_outputs_(num_outputs) {}
  ~PjrtExecutable();
  PjrtExecutable(const PjrtExecutable&) = delete;
  PjrtExecutable& operator=(const PjrtExecutable&) = delete;
  pjrt::PJRT_LoadedExecutable* handle() const { return handle_; }
  size_t num_outputs() const { return num_outputs_; }  // per device

 private:
  friend class PjrtClient;  // sets num_outputs_ once it has asked the plugin
  std::shared_ptr<PjrtLibrary> library_;
  pjrt::PJRT_LoadedExecutable* handle_;
  size_t num_outputs_;
};

// The job a client of several processes belongs to: its key-value callbacks are served by the
// job's store, and it is told its process ("node_id") and the processes ("num_nodes"), the
// options XLA's GPU plugin takes, unless `options` name them already.
struct PjrtJob {
  const chorus_kv_store* store = nullptr;  // borrowed; outlives the client
  int64_t process_index = 0;
  int64_t num_processes = 1;
  // The longest wait of a key-value get, whatever the plugin asks for: the job's time-out.
  std::chrono::milliseconds timeout{60000};
};

class PjrtClient {
 public:
  // Creates the plugin's client with `options` (and `job`'s, for a client of several
  // processes); a refused option comes back as the plugin says it, prefixed with the option
  // names chorus passed.
  PjrtClient(std::shared_ptr<PjrtLibrary> library, const std::vector<PjrtOption>& options,
             const PjrtJob* job = nullptr);
  ~PjrtClient();
  PjrtClient(const PjrtClient&) = delete;
  PjrtClient& operator=(const PjrtClient&) = delete;

  const std::shared_ptr<PjrtLibrary>& library() const { return library_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  int process_index() const { return process_index_; }
  // Every process's devices (PJRT_Client_Devices): more than addressable_devices() in a job of
  // several processes.
  size_t global_device_count() const { return global_device_count_; }
  // Whether the client was made for a job of several processes (its key-value callbacks are
  // the job's store).
  bool multi_process() const { return job_.num_processes > 1; }
  // The devices this process drives, in the plugin's order.
  const std::vector<PjrtDevice>& addressable_devices() const { return devices_; }

  // Copies `count` elements of `type` at `data` into a new buffer on `device` (1-D); the plugin
  // copies them during the call, and chorus waits up to `timeout` for it to say so.
  PjrtBuffer FromHost(const PjrtDevice& device, pjrt::PJRT_Buffer_Type type, const void* data,
                      int64_t count, std::chrono::milliseconds timeout) const;
  // Copies the whole of `buffer` into `dst` (`size` bytes, exactly the buffer's size), through
  // memory of chorus's own, so that a plugin that answers after the time-out writes nothing of
  // the caller's.
  void ToHost(const PjrtBuffer& buffer, void* dst, size_t size,
              std::chrono::milliseconds timeout) const;

  // Copies `buffer` to another device of this client without the host; waits up to `timeout`
  // for the copy to be ready.
  PjrtBuffer CopyToDevice(const PjrtBuffer& buffer, const PjrtDevice& device,
                          std::chrono::milliseconds timeout) const;

  // Compiles a StableHLO program (MLIR text) for `num_replicas` replicas, one partition: replica
  // r on the device of PJRT id device_ids[r], or without device_ids the client's default device
  // assignment (its first `num_replicas` devices); `portable`: one replica that runs on the
  // device Execute names.
  std::unique_ptr<PjrtExecutable> Compile(const std::string& mlir, int num_replicas,
                                          bool portable = false,
                                          const std::vector<int64_t>& device_ids = {}) const;
  // Runs `executable` on every device of its assignment, or on `device` alone (a portable
  // program): `arguments[d]` are replica d's (on the assignment's d-th device) (borrowed; an
  // argument the program donates is deleted by the run), and the result is each device's outputs.
  // Waits up to `timeout` for every device to finish.
  std::vector<std::vector<PjrtBuffer>> Execute(
      const PjrtExecutable& executable,
      const std::vector<std::vector<pjrt::PJRT_Buffer*>>& arguments,
      std::chrono::milliseconds timeout, const PjrtDevice* device = nullptr) const;

 private:
  std::shared_ptr<PjrtLibrary> library_;
  pjrt::PJRT_Client* client_ = nullptr;
  std::string platform_name_;
  std::string platform_version_;
  int process_index_ = 0;
  size_t global_device_count_ = 0;
  std::vector<PjrtDevice> devices_;
  PjrtJob job_;  // what the key-value callbacks read; outlives client_
};

// "INVALID_ARGUMENT", ... for a PJRT error code.
const char* PjrtErrorCodeName(pjrt::PJRT_Error_Code code);

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_PJRT_CLIENT_H_
