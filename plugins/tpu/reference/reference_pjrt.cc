// chorus's reference PJRT plugin: a PJRT C API implementation over host memory, so that the tpu
// plugin's code runs, and is tested, on a machine without accelerators. It is a test double of
// chorus's own, not XLA: it holds N host "devices", immutable buffers, and events completed on a
// worker thread, and it keeps the ABI's rules as real plugins do (argument structs smaller than
// the size it was built with are refused; a handle used after it was destroyed is an error, not a
// crash).
//
// Client options (PJRT_NamedValue): "device_count" (int64, 1..64, default 4) and
// "visible_devices" (int64 list of device ids to keep). Any other name is refused, naming it.
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
constexpr int64_t kMaxDevices = 64;

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
using reference_plugin::kPlatformName;
using reference_plugin::kPlatformVersion;
using reference_plugin::Live;
using reference_plugin::MakeError;
using reference_plugin::SubsetProgram;

struct PJRT_Event {
  std::shared_ptr<EventState> state;
};

struct PJRT_DeviceDescription {
  int id = 0;
  std::vector<int64_t> coords;
  PJRT_NamedValue attributes[1] = {};
};

struct PJRT_Device {
  PJRT_DeviceDescription description;
  int local_hardware_id = 0;
};

struct PJRT_Client {
  std::vector<std::unique_ptr<PJRT_Device>> devices;
  std::vector<PJRT_Device*> device_list;
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

PJRT_Error* ClientCreate(PJRT_Client_Create_Args* args) {
  CHECK_ARGS(PJRT_Client_Create_Args, client);
  if (CHORUS_REFERENCE_PJRT_FAULT == 5) {
    return MakeError(PJRT_Error_Code_INTERNAL, "no devices could be opened (fault variant 5)");
  }
  int64_t device_count = 4;
  std::vector<int64_t> visible;
  bool restrict_visible = false;
  for (size_t i = 0; i < args->num_options; ++i) {
    const PJRT_NamedValue& option = args->create_options[i];
    const std::string name = OptionName(option);
    if (name == "device_count") {
      if (option.type != PJRT_NamedValue_kInt64) {
        return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "option device_count must be an int64");
      }
      device_count = option.int64_value;
      if (device_count < 1 || device_count > kMaxDevices) {
        return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                         "option device_count=" + std::to_string(device_count) + " is outside 1.." +
                             std::to_string(kMaxDevices));
      }
    } else if (name == "visible_devices") {
      if (option.type != PJRT_NamedValue_kInt64List) {
        return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                         "option visible_devices must be a list of int64 device ids");
      }
      restrict_visible = true;
      visible.assign(option.int64_array_value, option.int64_array_value + option.value_size);
    } else {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "unknown client option '" + name +
                           "' (this plugin knows device_count and visible_devices)");
    }
  }
  auto client = std::make_unique<PJRT_Client>();
  for (int64_t id = 0; id < device_count; ++id) {
    if (restrict_visible && std::find(visible.begin(), visible.end(), id) == visible.end()) {
      continue;
    }
    auto device = std::make_unique<PJRT_Device>();
    device->description.id = static_cast<int>(id);
    device->local_hardware_id = static_cast<int>(id);
    device->description.coords = {id, 0, 0};
    PJRT_NamedValue& coords = device->description.attributes[0];
    coords.struct_size = CHORUS_PJRT_STRUCT_SIZE(PJRT_NamedValue, value_size);
    coords.name = "coords";
    coords.name_size = std::strlen(coords.name);
    coords.type = PJRT_NamedValue_kInt64List;
    coords.int64_array_value = device->description.coords.data();
    coords.value_size = device->description.coords.size();
    client->device_list.push_back(device.get());
    client->devices.push_back(std::move(device));
  }
  for (int64_t id : visible) {
    if (id < 0 || id >= device_count) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "option visible_devices names device " + std::to_string(id) +
                           ", but the devices are 0.." + std::to_string(device_count - 1));
    }
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
  args->process_index = 0;
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
  args->addressable_devices = args->client->device_list.data();
  args->num_addressable_devices = args->client->device_list.size();
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
  if (replicas < 1 || static_cast<size_t>(replicas) > args->client->device_list.size()) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     "PJRT_Client_Compile: " + std::to_string(replicas) +
                         " replicas on a client of " +
                         std::to_string(args->client->device_list.size()) + " devices");
  }
  std::vector<PJRT_Device*> devices;
  if (device_ids.empty()) {
    devices.assign(args->client->device_list.begin(), args->client->device_list.begin() + replicas);
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
    if (found == nullptr || std::find(devices.begin(), devices.end(), found) != devices.end()) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "PJRT_Client_Compile: the device assignment names device " +
                           std::to_string(id) + ", which " +
                           (found == nullptr ? "the client does not have" : "it names twice"));
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
  args->process_index = 0;
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
  args->is_addressable = true;
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
