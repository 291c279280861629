// chorus's reference PJRT plugin: a PJRT C API implementation over host memory, so that the tpu
// plugin's code runs, and is tested, on a machine without accelerators. It is a test double of
// chorus's own, not XLA: it holds N host "devices", immutable buffers, and events completed on a
// worker thread, and it keeps the ABI's rules as real plugins do (argument structs smaller than
// the size it was built with are refused; a handle used after it was destroyed is an error, not a
// crash).
//
// Client options (PJRT_NamedValue): "device_count" (int64, 1..64, default 4), "visible_devices"
// (int64 list of this process's device ids to keep), and for a multi-process client, as XLA's GPU
// plugin has one: "node_id" (int64, 0..num_nodes-1, default 0), "num_nodes" (int64, 1..64,
// default 1) and "kv_timeout_ms" (int64, 1..2147483647, default 60000: how long a key-value get
// waits). Any other name is refused, naming it.
//
// Multi-process (num_nodes > 1; PJRT_Client_Create_Args' kv_get_callback and kv_put_callback are
// then required): at create, node k puts "reference_pjrt/devices/<k>" = its device count (decimal
// text, after visible_devices) and gets every other node's. The client then has global devices:
// node n's are numbered after nodes 0..n-1's, in node order, with process_index n, coords
// {index within node n, n, 0} and local hardware id the index within node n (for this node's
// own devices, the id visible_devices names). PJRT_Client_Devices lists them all,
// PJRT_Client_AddressableDevices this node's; PJRT_Client_ProcessIndex is node_id. It runs no
// collective across processes: a buffer, a compile's device assignment or an execute on another
// process's device is refused. With num_nodes 1 (the default) the devices are this process's
// device_count devices, numbered 0..device_count-1 (visible_devices keeps some, with their ids).
//
// Built several times (Vulkan-Loader style) for the loader's tests, each variant one fault:
// CHORUS_REFERENCE_PJRT_FAULT = 0 (none), 1 (no GetPjrtApi symbol), 2 (GetPjrtApi returns
// nullptr), 3 (reports API major 1), 4 (reports minor 1 with a table that ends before the
// buffer slots), 5 (PJRT_Client_Create fails), 6 (every device-to-host copy completes with a
// device error), 7 (every device-to-host copy completes 2 s late).
//
// Programs: PJRT_Client_Compile takes the StableHLO subset chorus's tpu plugin emits
// (stablehlo_subset.h) in format "mlir", with a CompileOptionsProto whose num_replicas matches
// the module's; a program runs on the devices of the options' device assignment (one partition),
// else on the client's first num_replicas devices, or a one-replica program on the execute_device
// it is given. The library also
// exports chorus_reference_pjrt_compile_count(), the programs compiled so far, for tests.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "pjrt_abi.h"
#include "stablehlo_subset.h"

#ifndef CHORUS_REFERENCE_PJRT_FAULT
#define CHORUS_REFERENCE_PJRT_FAULT 0
#endif

namespace chorus::pjrt {

struct PJRT_Error {
  PJRT_Error_Code code;
  std::string message;
};

// Named (not anonymous) so that the PJRT_* structs below may hold them; nothing is exported.
namespace reference_plugin {

constexpr char kPlatformName[] = "reference";
constexpr char kPlatformVersion[] = "chorus reference PJRT plugin 1";
constexpr char kDeviceKind[] = "chorus reference host device";
constexpr int64_t kMaxDevices = 64;  // per process
constexpr int64_t kMaxNodes = 64;

PJRT_Error* MakeError(PJRT_Error_Code code, std::string message) {
  return new PJRT_Error{code, "reference PJRT plugin: " + std::move(message)};
}

// Refuses an argument struct smaller than this plugin's, as real plugins do.
#define CHECK_ARGS(Type, last_field)                                                           \
  do {                                                                                         \
    if (args == nullptr) return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, #Type " is null"); \
    constexpr size_t kNeeded = CHORUS_PJRT_STRUCT_SIZE(Type, last_field);                      \
    if (args->struct_size < kNeeded) {                                                         \
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,                                       \
                       #Type ": struct_size " + std::to_string(args->struct_size) +            \
                           " is smaller than " + std::to_string(kNeeded) +                     \
                           "; the caller was built against an older PJRT C API");              \
    }                                                                                          \
  } while (0)

// The handles alive now. Every entry point checks a handle here before it touches it, so a
// handle used after PJRT_*_Destroy is an error naming it, never a read of freed memory.
class LiveHandles {
 public:
  void Add(const void* handle) {
    std::lock_guard lock(mutex_);
    handles_.insert(handle);
  }
  void Remove(const void* handle) {
    std::lock_guard lock(mutex_);
    handles_.erase(handle);
  }
  bool Contains(const void* handle) {
    std::lock_guard lock(mutex_);
    return handles_.count(handle) != 0;
  }

 private:
  std::mutex mutex_;
  std::unordered_set<const void*> handles_;
};

// Programs compiled by this process's clients, for tests that check a cache compiles once.
std::atomic<uint64_t>& CompileCount() {
  static std::atomic<uint64_t> count{0};
  return count;
}

LiveHandles& Live() {
  static auto* live = new LiveHandles;  // never destroyed: events may complete during exit
  return *live;
}

#define CHECK_HANDLE(handle, what)                                                       \
  do {                                                                                   \
    if ((handle) == nullptr || !Live().Contains(handle)) {                               \
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,                                 \
                       std::string(what) + (handle == nullptr ? " is null"               \
                                                              : " is not a live handle " \
                                                                "(used after it was "    \
                                                                "destroyed?)"));         \
    }                                                                                    \
  } while (0)

// An event's shared state: set once, from the worker thread or at creation.
struct EventState {
  std::mutex mutex;
  std::condition_variable ready_changed;
  bool ready = false;
  bool failed = false;
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  std::string message;
  std::vector<std::pair<PJRT_Event_OnReadyCallback, void*>> callbacks;

  void Complete(const PJRT_Error* error) {
    std::vector<std::pair<PJRT_Event_OnReadyCallback, void*>> to_call;
    {
      std::lock_guard lock(mutex);
      ready = true;
      if (error != nullptr) {
        failed = true;
        code = error->code;
        message = error->message;
      }
      to_call.swap(callbacks);
    }
    ready_changed.notify_all();
    for (auto& [callback, user_arg] : to_call) callback(CopyError(), user_arg);
  }
  PJRT_Error* CopyError() {
    // Called with or without the lock: `failed` and the message never change once ready.
    return failed ? new PJRT_Error{code, message} : nullptr;
  }
};

// Runs the client's asynchronous work in order, as a device's queue would.
class WorkQueue {
 public:
  WorkQueue() : thread_([this] { Run(); }) {}
  ~WorkQueue() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void Post(std::function<void()> work) {
    {
      std::lock_guard lock(mutex_);
      work_.push_back(std::move(work));
    }
    changed_.notify_all();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !work_.empty(); });
        if (work_.empty()) return;  // stopping, and everything posted has run
        work = std::move(work_.front());
        work_.pop_front();
      }
      work();
    }
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> work_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace reference_plugin

using reference_plugin::EventState;
using reference_plugin::kDeviceKind;
using reference_plugin::kMaxDevices;
using reference_plugin::kMaxNodes;
using reference_plugin::kPlatformName;
using reference_plugin::kPlatformVersion;
using reference_plugin::Live;
using reference_plugin::MakeError;
using reference_plugin::SubsetProgram;

struct PJRT_Event {
  std::shared_ptr<EventState> state;
};

struct PJRT_DeviceDescription {
  int id = 0;             // global: unique across the processes of a multi-process client
  int process_index = 0;  // the node that owns the device
  std::vector<int64_t> coords;
  PJRT_NamedValue attributes[1] = {};
};

// One of a client's devices. Another process's device has only its description: nothing runs on
// it, and no buffer is put on it.
struct PJRT_Device {
  PJRT_Client* client = nullptr;
  PJRT_DeviceDescription description;
  int local_hardware_id = 0;
  bool addressable = true;
};

struct PJRT_Client {
  int process_index = 0;                              // node_id
  std::vector<std::unique_ptr<PJRT_Device>> devices;  // every process's, in id order
  std::vector<PJRT_Device*> device_list;              // the same devices
  std::vector<PJRT_Device*> addressable_devices;      // this process's, in id order
  reference_plugin::WorkQueue queue;  // last member: its thread stops before the devices go
};

struct PJRT_LoadedExecutable {
  PJRT_Client* client = nullptr;
  std::shared_ptr<const reference_plugin::SubsetProgram> program;
  std::vector<PJRT_Device*> devices;  // replica r's device: the assignment's, else client's r-th
};

struct PJRT_Executable {
  std::shared_ptr<const reference_plugin::SubsetProgram> program;
};

struct PJRT_Buffer {
  PJRT_Client* client = nullptr;
  PJRT_Device* device = nullptr;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  std::shared_ptr<const std::vector<unsigned char>> bytes;  // null once deleted
  std::shared_ptr<EventState> ready;
};

namespace {

size_t ElementSize(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_PRED:
    case PJRT_Buffer_Type_S8:
    case PJRT_Buffer_Type_U8:
      return 1;
    case PJRT_Buffer_Type_S16:
    case PJRT_Buffer_Type_U16:
    case PJRT_Buffer_Type_F16:
    case PJRT_Buffer_Type_BF16:
      return 2;
    case PJRT_Buffer_Type_S32:
    case PJRT_Buffer_Type_U32:
    case PJRT_Buffer_Type_F32:
      return 4;
    case PJRT_Buffer_Type_S64:
    case PJRT_Buffer_Type_U64:
    case PJRT_Buffer_Type_F64:
      return 8;
    default:
      return 0;
  }
}

PJRT_Event* NewEvent(std::shared_ptr<EventState> state) {
  auto* event = new PJRT_Event{std::move(state)};
  Live().Add(event);
  return event;
}

std::shared_ptr<EventState> ReadyState() {
  auto state = std::make_shared<EventState>();
  state->ready = true;
  return state;
}

// ----- Errors.
void ErrorDestroy(PJRT_Error_Destroy_Args* args) {
  if (args != nullptr) delete args->error;
}

void ErrorMessage(PJRT_Error_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  args->message = args->error->message.data();
  args->message_size = args->error->message.size();
}

PJRT_Error* ErrorGetCode(PJRT_Error_GetCode_Args* args) {
  CHECK_ARGS(PJRT_Error_GetCode_Args, code);
  if (args->error == nullptr) return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "error is null");
  args->code = args->error->code;
  return nullptr;
}

// ----- Plugin.
PJRT_Error* PluginInitialize(PJRT_Plugin_Initialize_Args* args) {
  CHECK_ARGS(PJRT_Plugin_Initialize_Args, extension_start);
  return nullptr;
}

PJRT_Error* PluginAttributes(PJRT_Plugin_Attributes_Args* args) {
  CHECK_ARGS(PJRT_Plugin_Attributes_Args, num_attributes);
  static const PJRT_NamedValue attributes[] = {[] {
    PJRT_NamedValue value{};
    value.struct_size = CHORUS_PJRT_STRUCT_SIZE(PJRT_NamedValue, value_size);
    value.name = "chorus_reference";
    value.name_size = std::strlen(value.name);
    value.type = PJRT_NamedValue_kBool;
    value.bool_value = true;
    value.value_size = 1;
    return value;
  }()};
  args->attributes = attributes;
  args->num_attributes = 1;
  return nullptr;
}

// ----- Events.
PJRT_Error* EventDestroy(PJRT_Event_Destroy_Args* args) {
  CHECK_ARGS(PJRT_Event_Destroy_Args, event);
  if (args->event == nullptr) return nullptr;
  CHECK_HANDLE(args->event, "PJRT_Event_Destroy: event");
  Live().Remove(args->event);
  delete args->event;
  return nullptr;
}

PJRT_Error* EventIsReady(PJRT_Event_IsReady_Args* args) {
  CHECK_ARGS(PJRT_Event_IsReady_Args, is_ready);
  CHECK_HANDLE(args->event, "PJRT_Event_IsReady: event");
  std::lock_guard lock(args->event->state->mutex);
  args->is_ready = args->event->state->ready;
  return nullptr;
}

PJRT_Error* EventError(PJRT_Event_Error_Args* args) {
  CHECK_ARGS(PJRT_Event_Error_Args, event);
  CHECK_HANDLE(args->event, "PJRT_Event_Error: event");
  EventState& state = *args->event->state;
  std::lock_guard lock(state.mutex);
  if (!state.ready) {
    return MakeError(PJRT_Error_Code_FAILED_PRECONDITION,
                     "PJRT_Event_Error called before the event is ready");
  }
  return state.CopyError();
}

PJRT_Error* EventAwait(PJRT_Event_Await_Args* args) {
  CHECK_ARGS(PJRT_Event_Await_Args, event);
  CHECK_HANDLE(args->event, "PJRT_Event_Await: event");
  EventState& state = *args->event->state;
  std::unique_lock lock(state.mutex);
  state.ready_changed.wait(lock, [&] { return state.ready; });
  return state.CopyError();
}

PJRT_Error* EventOnReady(PJRT_Event_OnReady_Args* args) {
  CHECK_ARGS(PJRT_Event_OnReady_Args, user_arg);
  CHECK_HANDLE(args->event, "PJRT_Event_OnReady: event");
  if (args->callback == nullptr) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "PJRT_Event_OnReady: callback is null");
  }
  EventState& state = *args->event->state;
  {
    std::lock_guard lock(state.mutex);
    if (!state.ready) {
      state.callbacks.emplace_back(args->callback, args->user_arg);
      return nullptr;
    }
  }
  args->callback(state.CopyError(), args->user_arg);
  return nullptr;
}

// ----- Client.
std::string OptionName(const PJRT_NamedValue& option) {
  return option.name == nullptr ? std::string() : std::string(option.name, option.name_size);
}

// An int64 option's value in `value`; an error naming the option when it is of another type or
// outside lo..hi.
PJRT_Error* ReadInt64Option(const PJRT_NamedValue& option, const std::string& name, int64_t lo,
                            int64_t hi, int64_t& value) {
  if (option.type != PJRT_NamedValue_kInt64) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "option " + name + " must be an int64");
  }
  value = option.int64_value;
  if (value < lo || value > hi) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "option " + name + "=" + std::to_string(value) + " is outside " +
                         std::to_string(lo) + ".." + std::to_string(hi));
  }
  return nullptr;
}

// The key under which node `node` of a multi-process client puts its device count.
std::string DevicesKey(int64_t node) { return "reference_pjrt/devices/" + std::to_string(node); }

// PJRT_CallbackError: how the key-value callbacks make an error this plugin returns and frees.
PJRT_Error* CallbackError(PJRT_Error_Code code, const char* message, size_t message_size) {
  return new PJRT_Error{code,
                        message == nullptr ? std::string() : std::string(message, message_size)};
}

// A key-value callback's error as PJRT_Client_Create's: its code, and its message after `what`.
PJRT_Error* CallbackFailed(const std::string& what, PJRT_Error* error) {
  PJRT_Error* failed = MakeError(error->code, what + " failed: " + error->message);
  delete error;
  return failed;
}

// `text` as a node's device count, 0..kMaxDevices; -1 when it is not one.
int64_t ParseDeviceCount(const std::string& text) {
  if (text.empty() || text.size() > 3) return -1;
  int64_t count = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    count = count * 10 + (c - '0');
  }
  return count <= kMaxDevices ? count : -1;
}

// A multi-process client's exchange at create: puts this node's device count under its key, then
// gets every other node's (each get waiting up to `timeout_ms`). counts[n]: node n's devices.
PJRT_Error* ExchangeDeviceCounts(const PJRT_Client_Create_Args& args, int64_t node_id,
                                 int64_t timeout_ms, std::vector<int64_t>& counts) {
  const std::string own_key = DevicesKey(node_id);
  const std::string own_value = std::to_string(counts[node_id]);
  PJRT_KeyValuePutCallback_Args put{};
  put.struct_size = CHORUS_PJRT_STRUCT_SIZE(PJRT_KeyValuePutCallback_Args, user_arg);
  put.key = own_key.data();
  put.key_size = own_key.size();
  put.value = own_value.data();
  put.value_size = own_value.size();
  put.callback_error = CallbackError;
  put.user_arg = args.kv_put_user_arg;
  if (PJRT_Error* error = args.kv_put_callback(&put)) {
    return CallbackFailed("key-value put of '" + own_key + "'", error);
  }
  for (int64_t node = 0; node < static_cast<int64_t>(counts.size()); ++node) {
    if (node == node_id) continue;
    const std::string key = DevicesKey(node);
    PJRT_KeyValueGetCallback_Args get{};
    get.struct_size =
        CHORUS_PJRT_STRUCT_SIZE(PJRT_KeyValueGetCallback_Args, value_deleter_callback);
    get.key = key.data();
    get.key_size = key.size();
    get.timeout_in_ms = static_cast<int>(timeout_ms);
    get.callback_error = CallbackError;
    get.user_arg = args.kv_get_user_arg;
    if (PJRT_Error* error = args.kv_get_callback(&get)) {
      return CallbackFailed("key-value get of '" + key + "'", error);
    }
    const std::string value =
        get.value == nullptr ? std::string() : std::string(get.value, get.value_size);
    if (get.value != nullptr && get.value_deleter_callback != nullptr) {
      get.value_deleter_callback(get.value);
    }
    counts[node] = ParseDeviceCount(value);
    if (counts[node] < 0) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "key-value get of '" + key + "' gave '" +
                                                             value.substr(0, 32) +
                                                             "', which is not a device count (0.." +
                                                             std::to_string(kMaxDevices) + ")");
    }
  }
  return nullptr;
}

PJRT_Error* ClientCreate(PJRT_Client_Create_Args* args) {
  CHECK_ARGS(PJRT_Client_Create_Args, client);
  if (CHORUS_REFERENCE_PJRT_FAULT == 5) {
    return MakeError(PJRT_Error_Code_INTERNAL, "no devices could be opened (fault variant 5)");
  }
  int64_t device_count = 4;
  std::vector<int64_t> visible;
  bool restrict_visible = false;
  int64_t node_id = 0;
  int64_t num_nodes = 1;
  int64_t kv_timeout_ms = 60000;
  for (size_t i = 0; i < args->num_options; ++i) {
    const PJRT_NamedValue& option = args->create_options[i];
    const std::string name = OptionName(option);
    PJRT_Error* error = nullptr;
    if (name == "device_count") {
      error = ReadInt64Option(option, name, 1, kMaxDevices, device_count);
    } else if (name == "visible_devices") {
      if (option.type != PJRT_NamedValue_kInt64List) {
        return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                         "option visible_devices must be a list of int64 device ids");
      }
      restrict_visible = true;
      visible.assign(option.int64_array_value, option.int64_array_value + option.value_size);
    } else if (name == "node_id") {
      // Its range, 0..num_nodes-1, is checked once every option is read.
      error = ReadInt64Option(option, name, std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max(), node_id);
    } else if (name == "num_nodes") {
      error = ReadInt64Option(option, name, 1, kMaxNodes, num_nodes);
    } else if (name == "kv_timeout_ms") {
      error = ReadInt64Option(option, name, 1, std::numeric_limits<int>::max(), kv_timeout_ms);
    } else {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "unknown client option '" + name +
                           "' (this plugin knows device_count, visible_devices, node_id, "
                           "num_nodes and kv_timeout_ms)");
    }
    if (error != nullptr) return error;
  }
  if (node_id < 0 || node_id >= num_nodes) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "option node_id=" + std::to_string(node_id) + " is outside 0.." +
                         std::to_string(num_nodes - 1) +
                         " (num_nodes=" + std::to_string(num_nodes) + ")");
  }
  if (num_nodes > 1 && (args->kv_get_callback == nullptr || args->kv_put_callback == nullptr)) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "option num_nodes=" + std::to_string(num_nodes) +
                         ": the key-value callbacks (PJRT_Client_Create_Args' kv_get_callback "
                         "and kv_put_callback) are needed for num_nodes > 1; the nodes exchange "
                         "their devices through them");
  }
  for (int64_t id : visible) {
    if (id < 0 || id >= device_count) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "option visible_devices names device " + std::to_string(id) +
                           ", but the devices are 0.." + std::to_string(device_count - 1));
    }
  }
  // This node's devices, by the ids visible_devices names.
  std::vector<int64_t> local_ids;
  for (int64_t id = 0; id < device_count; ++id) {
    if (!restrict_visible || std::find(visible.begin(), visible.end(), id) != visible.end()) {
      local_ids.push_back(id);
    }
  }
  std::vector<int64_t> counts(static_cast<size_t>(num_nodes), 0);
  counts[node_id] = static_cast<int64_t>(local_ids.size());
  if (num_nodes > 1) {
    if (PJRT_Error* error = ExchangeDeviceCounts(*args, node_id, kv_timeout_ms, counts)) {
      return error;
    }
  }
  auto client = std::make_unique<PJRT_Client>();
  client->process_index = static_cast<int>(node_id);
  int64_t first_id = 0;  // node n's first device's id: the devices of nodes 0..n-1 come first
  for (int64_t node = 0; node < num_nodes; ++node) {
    const bool own = node == node_id;
    for (int64_t index = 0; index < counts[node]; ++index) {
      // One process keeps the ids visible_devices names; several number each node's densely.
      const int64_t local_id = own ? local_ids[index] : index;
      auto device = std::make_unique<PJRT_Device>();
      device->client = client.get();
      device->addressable = own;
      device->local_hardware_id = static_cast<int>(local_id);
      device->description.id = static_cast<int>(num_nodes == 1 ? local_id : first_id + index);
      device->description.process_index = static_cast<int>(node);
      device->description.coords = {num_nodes == 1 ? local_id : index, node, 0};
      PJRT_NamedValue& coords = device->description.attributes[0];
      coords.struct_size = CHORUS_PJRT_STRUCT_SIZE(PJRT_NamedValue, value_size);
      coords.name = "coords";
      coords.name_size = std::strlen(coords.name);
      coords.type = PJRT_NamedValue_kInt64List;
      coords.int64_array_value = device->description.coords.data();
      coords.value_size = device->description.coords.size();
      client->device_list.push_back(device.get());
      if (own) client->addressable_devices.push_back(device.get());
      client->devices.push_back(std::move(device));
    }
    first_id += counts[node];
  }
  for (const auto& device : client->devices) {
    Live().Add(device.get());
    Live().Add(&device->description);
  }
  args->client = client.release();
  Live().Add(args->client);
  return nullptr;
}

PJRT_Error* ClientDestroy(PJRT_Client_Destroy_Args* args) {
  CHECK_ARGS(PJRT_Client_Destroy_Args, client);
  if (args->client == nullptr) return nullptr;
  CHECK_HANDLE(args->client, "PJRT_Client_Destroy: client");
  Live().Remove(args->client);
  for (const auto& device : args->client->devices) {
    Live().Remove(device.get());
    Live().Remove(&device->description);
  }
  delete args->client;  // the queue finishes what was posted first
  return nullptr;
}

PJRT_Error* ClientPlatformName(PJRT_Client_PlatformName_Args* args) {
  CHECK_ARGS(PJRT_Client_PlatformName_Args, platform_name_size);
  CHECK_HANDLE(args->client, "PJRT_Client_PlatformName: client");
  args->platform_name = kPlatformName;
  args->platform_name_size = std::strlen(kPlatformName);
  return nullptr;
}

PJRT_Error* ClientProcessIndex(PJRT_Client_ProcessIndex_Args* args) {
  CHECK_ARGS(PJRT_Client_ProcessIndex_Args, process_index);
  CHECK_HANDLE(args->client, "PJRT_Client_ProcessIndex: client");
  args->process_index = args->client->process_index;
  return nullptr;
}

PJRT_Error* ClientPlatformVersion(PJRT_Client_PlatformVersion_Args* args) {
  CHECK_ARGS(PJRT_Client_PlatformVersion_Args, platform_version_size);
  CHECK_HANDLE(args->client, "PJRT_Client_PlatformVersion: client");
  args->platform_version = kPlatformVersion;
  args->platform_version_size = std::strlen(kPlatformVersion);
  return nullptr;
}

PJRT_Error* ClientDevices(PJRT_Client_Devices_Args* args) {
  CHECK_ARGS(PJRT_Client_Devices_Args, num_devices);
  CHECK_HANDLE(args->client, "PJRT_Client_Devices: client");
  args->devices = args->client->device_list.data();
  args->num_devices = args->client->device_list.size();
  return nullptr;
}

PJRT_Error* ClientAddressableDevices(PJRT_Client_AddressableDevices_Args* args) {
  CHECK_ARGS(PJRT_Client_AddressableDevices_Args, num_addressable_devices);
  CHECK_HANDLE(args->client, "PJRT_Client_AddressableDevices: client");
  args->addressable_devices = args->client->addressable_devices.data();
  args->num_addressable_devices = args->client->addressable_devices.size();
  return nullptr;
}

// Null when `device` is one of `client`'s devices and on this process; else the error `what`
// (the entry point and the argument) returns. This plugin runs nothing across processes.
PJRT_Error* CheckOnThisProcess(const PJRT_Client* client, const PJRT_Device* device,
                               const std::string& what) {
  const std::string id = std::to_string(device->description.id);
  if (device->client != client) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     what + ": device " + id + " is another client's device, not this client's");
  }
  if (!device->addressable) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     what + ": device " + id + " belongs to process " +
                         std::to_string(device->description.process_index) +
                         "; the reference plugin runs on this process's devices only");
  }
  return nullptr;
}

PJRT_Error* ClientCompile(PJRT_Client_Compile_Args* args) {
  CHECK_ARGS(PJRT_Client_Compile_Args, executable);
  CHECK_HANDLE(args->client, "PJRT_Client_Compile: client");
  if (args->program == nullptr || args->program->code == nullptr ||
      args->program->format == nullptr) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "PJRT_Client_Compile: no program, or a program without its format");
  }
  const std::string format(args->program->format, args->program->format_size);
  if (format != "mlir") {
    return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                     "PJRT_Client_Compile: program format '" + format + "'; only 'mlir'");
  }
  std::shared_ptr<const SubsetProgram> program;
  int replicas = 1;
  std::vector<int64_t> device_ids;
  try {
    program = SubsetProgram::Parse(std::string_view(args->program->code, args->program->code_size));
    reference_plugin::CompileOptions options = reference_plugin::ReadCompileOptions(
        std::string_view(args->compile_options, args->compile_options_size));
    replicas = options.num_replicas;
    device_ids = std::move(options.device_ids);
  } catch (const std::exception& e) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     std::string("PJRT_Client_Compile: ") + e.what());
  }
  if (replicas != program->num_replicas()) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "PJRT_Client_Compile: the compile options say " + std::to_string(replicas) +
                         " replicas, the program's module " +
                         std::to_string(program->num_replicas()));
  }
  const std::vector<PJRT_Device*>& addressable = args->client->addressable_devices;
  if (replicas < 1 || static_cast<size_t>(replicas) > addressable.size()) {
    return MakeError(
        PJRT_Error_Code_INVALID_ARGUMENT,
        "PJRT_Client_Compile: " + std::to_string(replicas) + " replicas on a client of " +
            std::to_string(addressable.size()) +
            (addressable.size() == args->client->device_list.size() ? " devices"
                                                                    : " devices on this process"));
  }
  std::vector<PJRT_Device*> devices;
  if (device_ids.empty()) {
    devices.assign(addressable.begin(), addressable.begin() + replicas);
  } else if (device_ids.size() != static_cast<size_t>(replicas)) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "PJRT_Client_Compile: the device assignment lists " +
                         std::to_string(device_ids.size()) + " devices for " +
                         std::to_string(replicas) + " replicas");
  }
  for (int64_t id : device_ids) {
    PJRT_Device* found = nullptr;
    for (PJRT_Device* device : args->client->device_list) {
      if (device->description.id == id) found = device;
    }
    const std::string names =
        "PJRT_Client_Compile: the device assignment names device " + std::to_string(id) + ", ";
    if (found == nullptr) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       names + (addressable.size() == args->client->device_list.size()
                                    ? "which the client does not have"
                                    : "which no process of the client has"));
    }
    if (std::find(devices.begin(), devices.end(), found) != devices.end()) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, names + "which it names twice");
    }
    if (!found->addressable) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       names + "which belongs to process " +
                           std::to_string(found->description.process_index) +
                           "; the reference plugin runs on this process's devices only");
    }
    devices.push_back(found);
  }
  auto* executable =
      new PJRT_LoadedExecutable{args->client, std::move(program), std::move(devices)};
  Live().Add(executable);
  args->executable = executable;
  reference_plugin::CompileCount().fetch_add(1);
  return nullptr;
}

PJRT_Error* ClientBufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  CHECK_ARGS(PJRT_Client_BufferFromHostBuffer_Args, buffer);
  CHECK_HANDLE(args->client, "PJRT_Client_BufferFromHostBuffer: client");
  CHECK_HANDLE(args->device, "PJRT_Client_BufferFromHostBuffer: device");
  if (PJRT_Error* error =
          CheckOnThisProcess(args->client, args->device, "PJRT_Client_BufferFromHostBuffer")) {
    return error;
  }
  const size_t element_size = ElementSize(args->type);
  if (element_size == 0) {
    return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                     "buffer element type " + std::to_string(args->type) + " is not supported");
  }
  if (args->memory != nullptr || args->device_layout != nullptr ||
      (args->byte_strides != nullptr && args->num_byte_strides != 0)) {
    return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                     "only dense major-to-minor buffers in the device's default memory");
  }
  if (args->host_buffer_semantics == PJRT_HostBufferSemantics_kZeroCopy) {
    return MakeError(PJRT_Error_Code_UNIMPLEMENTED, "zero-copy host buffers");
  }
  size_t elements = 1;
  for (size_t i = 0; i < args->num_dims; ++i) {
    if (args->dims[i] < 0) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "dimension " + std::to_string(i) + " is negative");
    }
    elements *= static_cast<size_t>(args->dims[i]);
  }
  const size_t size = elements * element_size;
  if (size != 0 && args->data == nullptr) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "data is null for a non-empty buffer");
  }
  auto* buffer = new PJRT_Buffer;
  buffer->client = args->client;
  buffer->device = args->device;
  buffer->type = args->type;
  buffer->dims.assign(args->dims, args->dims + args->num_dims);
  const auto* bytes = static_cast<const unsigned char*>(args->data);
  // The copy is made during the call, whichever of the two copying semantics was asked for.
  buffer->bytes = std::make_shared<const std::vector<unsigned char>>(bytes, bytes + size);
  buffer->ready = ReadyState();
  Live().Add(buffer);
  args->done_with_host_buffer = NewEvent(ReadyState());
  args->buffer = buffer;
  return nullptr;
}

// ----- Device descriptions and devices.
PJRT_Error* DescriptionId(PJRT_DeviceDescription_Id_Args* args) {
  CHECK_ARGS(PJRT_DeviceDescription_Id_Args, id);
  CHECK_HANDLE(args->device_description, "PJRT_DeviceDescription_Id: description");
  args->id = args->device_description->id;
  return nullptr;
}

PJRT_Error* DescriptionProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  CHECK_ARGS(PJRT_DeviceDescription_ProcessIndex_Args, process_index);
  CHECK_HANDLE(args->device_description, "PJRT_DeviceDescription_ProcessIndex: description");
  args->process_index = args->device_description->process_index;
  return nullptr;
}

PJRT_Error* DescriptionAttributes(PJRT_DeviceDescription_Attributes_Args* args) {
  CHECK_ARGS(PJRT_DeviceDescription_Attributes_Args, attributes);
  CHECK_HANDLE(args->device_description, "PJRT_DeviceDescription_Attributes: description");
  args->attributes = args->device_description->attributes;
  args->num_attributes = 1;
  return nullptr;
}

PJRT_Error* DescriptionKind(PJRT_DeviceDescription_Kind_Args* args) {
  CHECK_ARGS(PJRT_DeviceDescription_Kind_Args, device_kind_size);
  CHECK_HANDLE(args->device_description, "PJRT_DeviceDescription_Kind: description");
  args->device_kind = kDeviceKind;
  args->device_kind_size = std::strlen(kDeviceKind);
  return nullptr;
}

PJRT_Error* DeviceGetDescription(PJRT_Device_GetDescription_Args* args) {
  CHECK_ARGS(PJRT_Device_GetDescription_Args, device_description);
  CHECK_HANDLE(args->device, "PJRT_Device_GetDescription: device");
  args->device_description = &args->device->description;
  return nullptr;
}

PJRT_Error* DeviceIsAddressable(PJRT_Device_IsAddressable_Args* args) {
  CHECK_ARGS(PJRT_Device_IsAddressable_Args, is_addressable);
  CHECK_HANDLE(args->device, "PJRT_Device_IsAddressable: device");
  args->is_addressable = args->device->addressable;
  return nullptr;
}

PJRT_Error* DeviceLocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  CHECK_ARGS(PJRT_Device_LocalHardwareId_Args, local_hardware_id);
  CHECK_HANDLE(args->device, "PJRT_Device_LocalHardwareId: device");
  args->local_hardware_id = args->device->local_hardware_id;
  return nullptr;
}

// ----- Executables: a program runs on its device assignment's devices (the first num_replicas
// devices without one), synchronously, during
// PJRT_LoadedExecutable_Execute; its events are ready when the call returns.
PJRT_Error* ExecutableDestroy(PJRT_Executable_Destroy_Args* args) {
  CHECK_ARGS(PJRT_Executable_Destroy_Args, executable);
  if (args->executable == nullptr) return nullptr;
  CHECK_HANDLE(args->executable, "PJRT_Executable_Destroy: executable");
  Live().Remove(args->executable);
  delete args->executable;
  return nullptr;
}

PJRT_Error* ExecutableNumOutputs(PJRT_Executable_NumOutputs_Args* args) {
  CHECK_ARGS(PJRT_Executable_NumOutputs_Args, num_outputs);
  CHECK_HANDLE(args->executable, "PJRT_Executable_NumOutputs: executable");
  args->num_outputs = args->executable->program->result_types().size();
  return nullptr;
}

PJRT_Error* LoadedExecutableDestroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  CHECK_ARGS(PJRT_LoadedExecutable_Destroy_Args, executable);
  if (args->executable == nullptr) return nullptr;
  CHECK_HANDLE(args->executable, "PJRT_LoadedExecutable_Destroy: executable");
  Live().Remove(args->executable);
  delete args->executable;
  return nullptr;
}

PJRT_Error* LoadedExecutableGetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  CHECK_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, executable);
  CHECK_HANDLE(args->loaded_executable, "PJRT_LoadedExecutable_GetExecutable: loaded_executable");
  auto* executable = new PJRT_Executable{args->loaded_executable->program};
  Live().Add(executable);
  args->executable = executable;
  return nullptr;
}

PJRT_Error* LoadedExecutableExecute(PJRT_LoadedExecutable_Execute_Args* args) {
  CHECK_ARGS(PJRT_LoadedExecutable_Execute_Args, execute_device);
  CHECK_HANDLE(args->executable, "PJRT_LoadedExecutable_Execute: executable");
  const PJRT_LoadedExecutable& executable = *args->executable;
  const SubsetProgram& program = *executable.program;
  if (!Live().Contains(executable.client)) {
    return MakeError(PJRT_Error_Code_FAILED_PRECONDITION,
                     "PJRT_LoadedExecutable_Execute: the executable's client was destroyed");
  }
  // execute_device: a one-replica program run on that device (as a portable executable is).
  if (args->execute_device != nullptr) {
    CHECK_HANDLE(args->execute_device, "PJRT_LoadedExecutable_Execute: execute_device");
    if (PJRT_Error* error = CheckOnThisProcess(executable.client, args->execute_device,
                                               "PJRT_LoadedExecutable_Execute: execute_device")) {
      return error;
    }
    if (program.num_replicas() != 1) {
      return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                       "PJRT_LoadedExecutable_Execute: execute_device for a program of " +
                           std::to_string(program.num_replicas()) + " replicas");
    }
  }
  auto device_of = [&](size_t replica) {
    return args->execute_device != nullptr ? args->execute_device : executable.devices[replica];
  };
  const auto replicas = static_cast<size_t>(program.num_replicas());
  if (args->num_devices != replicas || args->num_args != program.argument_types().size()) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "PJRT_LoadedExecutable_Execute: " + std::to_string(args->num_devices) +
                         " devices of " + std::to_string(args->num_args) +
                         " arguments; the program runs on " + std::to_string(replicas) +
                         " devices with " + std::to_string(program.argument_types().size()));
  }
  if (args->argument_lists == nullptr || args->output_lists == nullptr) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "PJRT_LoadedExecutable_Execute: argument_lists or output_lists is null");
  }
  std::unordered_set<int64_t> not_donated;
  if (args->options != nullptr && args->options->non_donatable_input_indices != nullptr) {
    for (size_t i = 0; i < args->options->num_non_donatable_input_indices; ++i) {
      not_donated.insert(args->options->non_donatable_input_indices[i]);
    }
  }
  std::vector<std::vector<reference_plugin::HostTensor>> arguments(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    PJRT_Device* device = device_of(r);
    for (size_t a = 0; a < args->num_args; ++a) {
      PJRT_Buffer* buffer = args->argument_lists[r][a];
      const std::string what = "PJRT_LoadedExecutable_Execute: argument " + std::to_string(a) +
                               " of device " + std::to_string(r);
      CHECK_HANDLE(buffer, what);
      if (!buffer->bytes) {
        return MakeError(PJRT_Error_Code_FAILED_PRECONDITION, what + " was deleted (donated?)");
      }
      if (buffer->device != device) {
        return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                         what + " is on device " + std::to_string(buffer->device->description.id) +
                             ", not on the replica's device " +
                             std::to_string(device->description.id));
      }
      arguments[r].push_back({{}, buffer->bytes});
    }
  }
  std::vector<std::vector<reference_plugin::HostTensor>> results;
  try {
    results = program.Run(arguments);
  } catch (const std::exception& e) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     std::string("PJRT_LoadedExecutable_Execute: ") + e.what());
  }
  for (size_t r = 0; r < replicas; ++r) {
    for (size_t j = 0; j < results[r].size(); ++j) {
      auto* buffer = new PJRT_Buffer;
      buffer->client = executable.client;
      buffer->device = device_of(r);
      buffer->type = PJRT_Buffer_Type_U8;
      buffer->dims = results[r][j].type.dims;
      buffer->bytes = results[r][j].bytes;
      buffer->ready = ReadyState();
      Live().Add(buffer);
      args->output_lists[r][j] = buffer;
    }
    if (args->device_complete_events != nullptr) {
      args->device_complete_events[r] = NewEvent(ReadyState());
    }
    // A donated argument's buffer now belongs to the result: the caller's handle is deleted.
    for (size_t a = 0; a < args->num_args; ++a) {
      if (program.aliasing()[a] >= 0 && not_donated.count(static_cast<int64_t>(a)) == 0) {
        args->argument_lists[r][a]->bytes.reset();
      }
    }
  }
  return nullptr;
}

// ----- Buffers.
PJRT_Error* BufferDestroy(PJRT_Buffer_Destroy_Args* args) {
  CHECK_ARGS(PJRT_Buffer_Destroy_Args, buffer);
  if (args->buffer == nullptr) return nullptr;
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_Destroy: buffer");
  Live().Remove(args->buffer);
  delete args->buffer;  // work still queued on it holds its bytes
  return nullptr;
}

PJRT_Error* BufferElementType(PJRT_Buffer_ElementType_Args* args) {
  CHECK_ARGS(PJRT_Buffer_ElementType_Args, type);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_ElementType: buffer");
  args->type = args->buffer->type;
  return nullptr;
}

PJRT_Error* BufferDimensions(PJRT_Buffer_Dimensions_Args* args) {
  CHECK_ARGS(PJRT_Buffer_Dimensions_Args, num_dims);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_Dimensions: buffer");
  args->dims = args->buffer->dims.data();
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* BufferOnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  CHECK_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_OnDeviceSizeInBytes: buffer");
  if (!args->buffer->bytes) {
    return MakeError(PJRT_Error_Code_FAILED_PRECONDITION, "the buffer was deleted");
  }
  args->on_device_size_in_bytes = args->buffer->bytes->size();
  return nullptr;
}

PJRT_Error* BufferDevice(PJRT_Buffer_Device_Args* args) {
  CHECK_ARGS(PJRT_Buffer_Device_Args, device);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_Device: buffer");
  args->device = args->buffer->device;
  return nullptr;
}

PJRT_Error* BufferDelete(PJRT_Buffer_Delete_Args* args) {
  CHECK_ARGS(PJRT_Buffer_Delete_Args, buffer);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_Delete: buffer");
  args->buffer->bytes.reset();
  return nullptr;
}

PJRT_Error* BufferIsDeleted(PJRT_Buffer_IsDeleted_Args* args) {
  CHECK_ARGS(PJRT_Buffer_IsDeleted_Args, is_deleted);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_IsDeleted: buffer");
  args->is_deleted = !args->buffer->bytes;
  return nullptr;
}

PJRT_Error* BufferCopyToDevice(PJRT_Buffer_CopyToDevice_Args* args) {
  CHECK_ARGS(PJRT_Buffer_CopyToDevice_Args, dst_buffer);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_CopyToDevice: buffer");
  CHECK_HANDLE(args->dst_device, "PJRT_Buffer_CopyToDevice: dst_device");
  if (PJRT_Error* error = CheckOnThisProcess(args->buffer->client, args->dst_device,
                                             "PJRT_Buffer_CopyToDevice: dst_device")) {
    return error;
  }
  if (!args->buffer->bytes) {
    return MakeError(PJRT_Error_Code_FAILED_PRECONDITION,
                     "PJRT_Buffer_CopyToDevice: the buffer was deleted");
  }
  auto* copy = new PJRT_Buffer(*args->buffer);  // the bytes are immutable: shared
  copy->device = args->dst_device;
  copy->ready = ReadyState();
  Live().Add(copy);
  args->dst_buffer = copy;
  return nullptr;
}

PJRT_Error* BufferToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  CHECK_ARGS(PJRT_Buffer_ToHostBuffer_Args, event);
  CHECK_HANDLE(args->src, "PJRT_Buffer_ToHostBuffer: src");
  if (args->host_layout != nullptr) {
    return MakeError(PJRT_Error_Code_UNIMPLEMENTED, "only the buffer's own (dense) host layout");
  }
  std::shared_ptr<const std::vector<unsigned char>> bytes = args->src->bytes;
  if (!bytes) {
    return MakeError(PJRT_Error_Code_FAILED_PRECONDITION,
                     "PJRT_Buffer_ToHostBuffer: the buffer was deleted");
  }
  if (args->dst == nullptr) {
    args->dst_size = bytes->size();
    return nullptr;
  }
  if (!Live().Contains(args->src->client)) {
    return MakeError(PJRT_Error_Code_FAILED_PRECONDITION,
                     "PJRT_Buffer_ToHostBuffer: the buffer's client was destroyed");
  }
  if (args->dst_size < bytes->size()) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "PJRT_Buffer_ToHostBuffer: dst_size " + std::to_string(args->dst_size) +
                         " is smaller than the buffer's " + std::to_string(bytes->size()) +
                         " bytes");
  }
  auto state = std::make_shared<EventState>();
  args->event = NewEvent(state);
  void* dst = args->dst;
  args->src->client->queue.Post([state, bytes, dst] {
    if (CHORUS_REFERENCE_PJRT_FAULT == 6) {
      const PJRT_Error error{PJRT_Error_Code_INTERNAL,
                             "reference PJRT plugin: device error while copying to the host "
                             "(fault variant 6)"};
      state->Complete(&error);
      return;
    }
    if (CHORUS_REFERENCE_PJRT_FAULT == 7) std::this_thread::sleep_for(std::chrono::seconds(2));
    if (!bytes->empty()) std::memcpy(dst, bytes->data(), bytes->size());
    state->Complete(nullptr);
  });
  return nullptr;
}

PJRT_Error* BufferReadyEvent(PJRT_Buffer_ReadyEvent_Args* args) {
  CHECK_ARGS(PJRT_Buffer_ReadyEvent_Args, event);
  CHECK_HANDLE(args->buffer, "PJRT_Buffer_ReadyEvent: buffer");
  if (!args->buffer->bytes) {
    auto state = std::make_shared<EventState>();
    const PJRT_Error error{PJRT_Error_Code_FAILED_PRECONDITION,
                           "reference PJRT plugin: the buffer was deleted"};
    state->Complete(&error);
    args->event = NewEvent(state);
    return nullptr;
  }
  args->event = NewEvent(args->buffer->ready);
  return nullptr;
}

PJRT_Api MakeApi() {
  PJRT_Api api{};
  api.struct_size = kPjrtApiSizeNeeded;
  api.pjrt_api_version.struct_size = CHORUS_PJRT_STRUCT_SIZE(PJRT_Api_Version, minor_version);
  api.pjrt_api_version.major_version = kPjrtMajor;
  api.pjrt_api_version.minor_version = kPjrtMinor;
  if (CHORUS_REFERENCE_PJRT_FAULT == 3) api.pjrt_api_version.major_version = 1;
  if (CHORUS_REFERENCE_PJRT_FAULT == 4) {
    api.pjrt_api_version.minor_version = 1;
    api.struct_size = offsetof(PJRT_Api, PJRT_Buffer_Destroy);
  }
  api.PJRT_Error_Destroy = ErrorDestroy;
  api.PJRT_Error_Message = ErrorMessage;
  api.PJRT_Error_GetCode = ErrorGetCode;
  api.PJRT_Plugin_Initialize = PluginInitialize;
  api.PJRT_Plugin_Attributes = PluginAttributes;
  api.PJRT_Event_Destroy = EventDestroy;
  api.PJRT_Event_IsReady = EventIsReady;
  api.PJRT_Event_Error = EventError;
  api.PJRT_Event_Await = EventAwait;
  api.PJRT_Event_OnReady = EventOnReady;
  api.PJRT_Client_Create = ClientCreate;
  api.PJRT_Client_Destroy = ClientDestroy;
  api.PJRT_Client_PlatformName = ClientPlatformName;
  api.PJRT_Client_ProcessIndex = ClientProcessIndex;
  api.PJRT_Client_PlatformVersion = ClientPlatformVersion;
  api.PJRT_Client_Devices = ClientDevices;
  api.PJRT_Client_AddressableDevices = ClientAddressableDevices;
  api.PJRT_Client_Compile = ClientCompile;
  api.PJRT_Client_BufferFromHostBuffer = ClientBufferFromHostBuffer;
  api.PJRT_DeviceDescription_Id = DescriptionId;
  api.PJRT_DeviceDescription_ProcessIndex = DescriptionProcessIndex;
  api.PJRT_DeviceDescription_Attributes = DescriptionAttributes;
  api.PJRT_DeviceDescription_Kind = DescriptionKind;
  api.PJRT_Device_GetDescription = DeviceGetDescription;
  api.PJRT_Device_IsAddressable = DeviceIsAddressable;
  api.PJRT_Device_LocalHardwareId = DeviceLocalHardwareId;
  api.PJRT_Executable_Destroy = ExecutableDestroy;
  api.PJRT_Executable_NumOutputs = ExecutableNumOutputs;
  api.PJRT_LoadedExecutable_Destroy = LoadedExecutableDestroy;
  api.PJRT_LoadedExecutable_GetExecutable = LoadedExecutableGetExecutable;
  api.PJRT_LoadedExecutable_Execute = LoadedExecutableExecute;
  api.PJRT_Buffer_Destroy = BufferDestroy;
  api.PJRT_Buffer_ElementType = BufferElementType;
  api.PJRT_Buffer_Dimensions = BufferDimensions;
  api.PJRT_Buffer_OnDeviceSizeInBytes = BufferOnDeviceSizeInBytes;
  api.PJRT_Buffer_Device = BufferDevice;
  api.PJRT_Buffer_Delete = BufferDelete;
  api.PJRT_Buffer_IsDeleted = BufferIsDeleted;
  api.PJRT_Buffer_CopyToDevice = BufferCopyToDevice;
  api.PJRT_Buffer_ToHostBuffer = BufferToHostBuffer;
  api.PJRT_Buffer_ReadyEvent = BufferReadyEvent;
  return api;
}

}  // namespace

}  // namespace chorus::pjrt

#if CHORUS_REFERENCE_PJRT_FAULT == 1
// Fault variant 1: a library that is not a PJRT plugin at all.
extern "C" __attribute__((visibility("default"))) int NotAPjrtPlugin() {
  return chorus::pjrt::MakeApi().struct_size != 0 ? 1 : 0;  // the same table, under another name
}
#else
extern "C" __attribute__((visibility("default"))) const chorus::pjrt::PJRT_Api* GetPjrtApi() {
  if (CHORUS_REFERENCE_PJRT_FAULT == 2) return nullptr;
  static const chorus::pjrt::PJRT_Api api = chorus::pjrt::MakeApi();
  return &api;
}
#endif

#if CHORUS_REFERENCE_PJRT_FAULT != 1
// For tests: how many programs this process has compiled (a cache that works compiles once).
extern "C" __attribute__((visibility("default"))) uint64_t chorus_reference_pjrt_compile_count() {
  return chorus::pjrt::reference_plugin::CompileCount().load();
}
#endif
