#include "pjrt_client.h"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <chorus/error.hpp>
#include <chorus/plugin_sdk.hpp>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>

#include "stablehlo_programs.h"

namespace chorus::tpu {
namespace {

using namespace pjrt;  // NOLINT: this file speaks the PJRT ABI throughout

constexpr char kReferenceName[] = "reference";
constexpr char kLibtpu[] = "libtpu.so";

std::string EnvOr(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

chorus_status StatusFor(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_INVALID_ARGUMENT:
    case PJRT_Error_Code_OUT_OF_RANGE:
    case PJRT_Error_Code_FAILED_PRECONDITION:
      return CHORUS_INVALID_ARGUMENT;
    case PJRT_Error_Code_NOT_FOUND:
      return CHORUS_NOT_FOUND;
    case PJRT_Error_Code_UNIMPLEMENTED:
      return CHORUS_UNSUPPORTED;
    case PJRT_Error_Code_DEADLINE_EXCEEDED:
      return CHORUS_TIMEOUT;
    case PJRT_Error_Code_RESOURCE_EXHAUSTED:
      return CHORUS_OUT_OF_MEMORY;
    case PJRT_Error_Code_UNAVAILABLE:
      return CHORUS_UNAVAILABLE;
    case PJRT_Error_Code_ABORTED:
    case PJRT_Error_Code_CANCELLED:
      return CHORUS_ABORTED;
    default:
      return CHORUS_INTERNAL;
  }
}

// The PJRT client's key-value callbacks over the job's store (user_arg: the client's PjrtJob).
// A failure is an error the plugin owns, made by its callback_error, naming the key.
PJRT_Error* StoreError(PJRT_CallbackError* make_error, chorus_status status,
                       const std::string& what) {
  if (make_error == nullptr) {  // a plugin that gives no way to say it: at least the log does
    sdk::Log(CHORUS_LOG_ERROR, "pjrt: the PJRT plugin's key-value " + what + " failed with " +
                                   StatusName(status) + " and the plugin gave no callback_error");
    return nullptr;
  }
  const PJRT_Error_Code code = status == CHORUS_TIMEOUT     ? PJRT_Error_Code_DEADLINE_EXCEEDED
                               : status == CHORUS_NOT_FOUND ? PJRT_Error_Code_NOT_FOUND
                                                            : PJRT_Error_Code_UNAVAILABLE;
  const std::string message =
      "chorus's job store: " + what + " failed with " + std::string(StatusName(status)) +
      (status == CHORUS_TIMEOUT ? " (is every host's process started, with the same job?)"
                                : " (the job's leader, worker 0, serves the store)");
  return (*make_error)(code, message.data(), message.size());
}

PJRT_Error* KeyValueGet(PJRT_KeyValueGetCallback_Args* args) {
  const auto* job = static_cast<const PjrtJob*>(args->user_arg);
  const std::string key(args->key, args->key_size);
  // The plugin's wait, within the job's time-out (a negative one is the job's).
  const int64_t limit = job->timeout.count();
  const int64_t timeout_ms =
      args->timeout_in_ms < 0 ? limit : std::min<int64_t>(args->timeout_in_ms, limit);
  const std::string what =
      "get of '" + key + "' (waited up to " + std::to_string(timeout_ms) + " ms)";
  std::vector<char> value(256);
  size_t size = 0;
  chorus_status status =
      job->store->get(job->store->ctx, key.c_str(), timeout_ms, value.data(), value.size(), &size);
  if (status == CHORUS_OK && size > value.size()) {
    value.resize(size);
    status = job->store->get(job->store->ctx, key.c_str(), 0, value.data(), value.size(), &size);
  }
  if (status != CHORUS_OK) return StoreError(args->callback_error, status, what);
  char* out = new char[size > 0 ? size : 1];
  std::memcpy(out, value.data(), size);
  args->value = out;
  args->value_size = size;
  args->value_deleter_callback = [](char* v) { delete[] v; };
  return nullptr;
}

PJRT_Error* KeyValuePut(PJRT_KeyValuePutCallback_Args* args) {
  const auto* job = static_cast<const PjrtJob*>(args->user_arg);
  const std::string key(args->key, args->key_size);
  const chorus_status status =
      job->store->set(job->store->ctx, key.c_str(), args->value, args->value_size);
  return status == CHORUS_OK ? nullptr
                             : StoreError(args->callback_error, status, "put of '" + key + "'");
}

// Sets struct_size to the size chorus was built with, as the ABI asks of every caller.
template <typename Args>
Args MakeArgs() {
  Args args{};
  args.struct_size = sizeof(Args);
  return args;
}

std::string ViewString(const char* data, size_t size) {
  return data == nullptr ? std::string() : std::string(data, size);
}

// What one PJRT_Event_OnReady callback and its waiter share; the callback may come after the
// waiter gave up, so each side holds a reference.
struct EventWait {
  std::mutex mutex;
  std::condition_variable done;
  bool ready = false;
  bool abandoned = false;  // the waiter timed out: the callback frees the error itself
  PJRT_Error* error = nullptr;
  const PJRT_Api* api = nullptr;
  std::shared_ptr<void> keep_alive;  // memory the plugin may still write until the callback
};

void OnEventReady(PJRT_Error* error, void* user_arg) {
  std::unique_ptr<std::shared_ptr<EventWait>> holder(
      static_cast<std::shared_ptr<EventWait>*>(user_arg));
  EventWait& wait = **holder;
  std::unique_lock lock(wait.mutex);
  if (wait.abandoned) {
    lock.unlock();
    if (error != nullptr) {
      auto destroy = MakeArgs<PJRT_Error_Destroy_Args>();
      destroy.error = error;
      wait.api->PJRT_Error_Destroy(&destroy);
    }
    return;
  }
  wait.ready = true;
  wait.error = error;
  lock.unlock();
  wait.done.notify_all();
}

}  // namespace

const char* PjrtErrorCodeName(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_CANCELLED:
      return "CANCELLED";
    case PJRT_Error_Code_UNKNOWN:
      return "UNKNOWN";
    case PJRT_Error_Code_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case PJRT_Error_Code_DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case PJRT_Error_Code_NOT_FOUND:
      return "NOT_FOUND";
    case PJRT_Error_Code_ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case PJRT_Error_Code_PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case PJRT_Error_Code_RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case PJRT_Error_Code_FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case PJRT_Error_Code_ABORTED:
      return "ABORTED";
    case PJRT_Error_Code_OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case PJRT_Error_Code_UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case PJRT_Error_Code_INTERNAL:
      return "INTERNAL";
    case PJRT_Error_Code_UNAVAILABLE:
      return "UNAVAILABLE";
    case PJRT_Error_Code_DATA_LOSS:
      return "DATA_LOSS";
    case PJRT_Error_Code_UNAUTHENTICATED:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN_CODE";
}

std::string ReferencePjrtPluginPath() {
  boost::system::error_code error;
  // Absolute: the loader reports a program started by a relative path as such.
  const std::filesystem::path self =
      std::filesystem::absolute(boost::dll::this_line_location(error).native());
  const std::filesystem::path name = "libchorus-pjrt-reference.so";
  // From lib/chorus/plugins/ (the tpu plugin) or from bin/ (a program or test linking this code).
  for (const std::filesystem::path& candidate :
       {self.parent_path().parent_path() / "pjrt" / name,
        self.parent_path().parent_path() / "lib" / "chorus" / "pjrt" / name}) {
    if (std::filesystem::exists(candidate)) return candidate.lexically_normal().string();
  }
  return (self.parent_path().parent_path() / "pjrt" / name).lexically_normal().string();
}

PjrtPluginChoice ChoosePjrtPlugin(const std::string& reference_path) {
  if (const std::string chosen = EnvOr("CHORUS_PJRT_PLUGIN"); !chosen.empty()) {
    return {chosen == kReferenceName ? reference_path : chosen, "CHORUS_PJRT_PLUGIN"};
  }
  if (const std::string path = EnvOr("TPU_LIBRARY_PATH"); !path.empty()) {
    return {path, "TPU_LIBRARY_PATH"};
  }
  // libtpu.so where the dynamic loader looks (LD_LIBRARY_PATH, the cache, the default folders).
  if (void* handle = ::dlopen(kLibtpu, RTLD_LAZY | RTLD_LOCAL)) {
    ::dlclose(handle);
    return {kLibtpu, "libtpu.so on the loader's path"};
  }
  throw Error(CHORUS_NOT_FOUND,
              "no PJRT plugin found: set CHORUS_PJRT_PLUGIN to a PJRT plugin library (or to "
              "'reference' for chorus's reference plugin on host memory), or TPU_LIBRARY_PATH to "
              "libtpu.so, or put libtpu.so on the loader's path (LD_LIBRARY_PATH)");
}

std::vector<PjrtOption> ParsePjrtOptions(std::string_view text) {
  std::vector<PjrtOption> options;
  size_t start = 0;
  while (start <= text.size()) {
    // A comma inside brackets belongs to a list.
    size_t end = start;
    int depth = 0;
    while (end < text.size() && (text[end] != ',' || depth > 0)) {
      if (text[end] == '[') ++depth;
      if (text[end] == ']') --depth;
      ++end;
    }
    const std::string_view entry = text.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) {
      if (end >= text.size()) break;
      continue;
    }
    const size_t equals = entry.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "CHORUS_PJRT_OPTIONS: '" + std::string(entry) +
                      "' is not name=value (e.g. CHORUS_PJRT_OPTIONS=device_count=2)");
    }
    PjrtOption option;
    option.name = std::string(entry.substr(0, equals));
    const std::string value(entry.substr(equals + 1));
    char* parse_end = nullptr;
    if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
      option.type = PJRT_NamedValue_kInt64List;
      std::string_view items = std::string_view(value).substr(1, value.size() - 2);
      while (!items.empty()) {
        const size_t separator = items.find_first_of(";,");
        const std::string item(items.substr(0, separator));
        const long long number = std::strtoll(item.c_str(), &parse_end, 10);
        if (item.empty() || *parse_end != '\0') {
          throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_PJRT_OPTIONS: " + option.name + "=" + value +
                                                   ": '" + item +
                                                   "' is not an integer (lists hold integers)");
        }
        option.int64_list.push_back(number);
        items =
            separator == std::string_view::npos ? std::string_view() : items.substr(separator + 1);
      }
    } else if (value.empty()) {
      option.omit = true;
    } else if (value == "true" || value == "false") {
      option.type = PJRT_NamedValue_kBool;
      option.bool_value = value == "true";
    } else if (const long long number = std::strtoll(value.c_str(), &parse_end, 10);
               !value.empty() && *parse_end == '\0') {
      option.type = PJRT_NamedValue_kInt64;
      option.int64_value = number;
    } else if (const float real = std::strtof(value.c_str(), &parse_end);
               !value.empty() && *parse_end == '\0') {
      option.type = PJRT_NamedValue_kFloat;
      option.float_value = real;
    } else {
      option.type = PJRT_NamedValue_kString;
      option.string_value = value;
    }
    options.push_back(std::move(option));
  }
  return options;
}

std::shared_ptr<PjrtLibrary> PjrtLibrary::Open(const PjrtPluginChoice& choice) {
  const std::string from = "PJRT plugin " + choice.path + " (from " + choice.source + ")";
  if (choice.path.find('/') != std::string::npos && !std::filesystem::exists(choice.path)) {
    throw Error(CHORUS_NOT_FOUND, from + ": no such file; point " + choice.source +
                                      " at a PJRT plugin library (one exporting GetPjrtApi)");
  }
  void* handle = ::dlopen(choice.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = ::dlerror();
    throw Error(CHORUS_NOT_FOUND,
                from + " cannot be loaded: " + (reason != nullptr ? reason : "unknown reason"));
  }
  // From here on the library stays loaded, even on an error: unloading a library that started
  // threads in its initializers is not safe.
  auto* get_api = reinterpret_cast<GetPjrtApiFunction*>(::dlsym(handle, kGetPjrtApiSymbol));
  if (get_api == nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                from + " exports no GetPjrtApi: it is not a PJRT C API plugin");
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    throw Error(CHORUS_INTERNAL, from + ": GetPjrtApi returned no table");
  }
  const int major = api->pjrt_api_version.major_version;
  const int minor = api->pjrt_api_version.minor_version;
  const std::string version = std::to_string(major) + "." + std::to_string(minor);
  if (major != kPjrtMajor) {
    throw Error(CHORUS_UNSUPPORTED,
                from + " implements PJRT C API " + version + "; chorus speaks major version " +
                    std::to_string(kPjrtMajor) + " (0." + std::to_string(kPjrtMinor) +
                    " or later): use a plugin built for PJRT C API 0.x");
  }
  if (minor < kPjrtMinor || api->struct_size < kPjrtApiSizeNeeded) {
    throw Error(CHORUS_UNSUPPORTED, from + " implements PJRT C API " + version + " (a table of " +
                                        std::to_string(api->struct_size) +
                                        " bytes); chorus needs 0." + std::to_string(kPjrtMinor) +
                                        " or later (" + std::to_string(kPjrtApiSizeNeeded) +
                                        " bytes): use a newer plugin");
  }
  auto library = std::shared_ptr<PjrtLibrary>(new PjrtLibrary(choice, api));
  auto args = MakeArgs<PJRT_Plugin_Initialize_Args>();
  library->Check(api->PJRT_Plugin_Initialize(&args), "PJRT_Plugin_Initialize");
  return library;
}

void PjrtLibrary::Check(PJRT_Error* error, std::string_view what) const {
  if (error == nullptr) return;
  auto message_args = MakeArgs<PJRT_Error_Message_Args>();
  message_args.error = error;
  api_->PJRT_Error_Message(&message_args);
  auto code_args = MakeArgs<PJRT_Error_GetCode_Args>();
  code_args.error = error;
  PJRT_Error* code_error = api_->PJRT_Error_GetCode(&code_args);
  const PJRT_Error_Code code = code_error == nullptr ? code_args.code : PJRT_Error_Code_UNKNOWN;
  std::string text = std::string(what) + " failed in PJRT plugin " + choice_.path + " (" +
                     PjrtErrorCodeName(code) +
                     "): " + ViewString(message_args.message, message_args.message_size);
  auto destroy = MakeArgs<PJRT_Error_Destroy_Args>();
  if (code_error != nullptr) {
    destroy.error = code_error;
    api_->PJRT_Error_Destroy(&destroy);
  }
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
  throw Error(StatusFor(code), text);
}

void PjrtLibrary::Await(PJRT_Event* event, std::chrono::milliseconds timeout, std::string_view what,
                        std::shared_ptr<void> keep_alive) const {
  auto wait = std::make_shared<EventWait>();
  wait->api = api_;
  wait->keep_alive = std::move(keep_alive);
  auto on_ready = MakeArgs<PJRT_Event_OnReady_Args>();
  on_ready.event = event;
  on_ready.callback = OnEventReady;
  on_ready.user_arg = new std::shared_ptr<EventWait>(wait);
  PJRT_Error* refused = api_->PJRT_Event_OnReady(&on_ready);
  auto destroy = MakeArgs<PJRT_Event_Destroy_Args>();
  destroy.event = event;
  if (refused != nullptr) {
    delete static_cast<std::shared_ptr<EventWait>*>(on_ready.user_arg);
    PJRT_Error* destroy_error = api_->PJRT_Event_Destroy(&destroy);
    if (destroy_error != nullptr) {
      auto free_error = MakeArgs<PJRT_Error_Destroy_Args>();
      free_error.error = destroy_error;
      api_->PJRT_Error_Destroy(&free_error);
    }
    Check(refused, std::string(what) + " (PJRT_Event_OnReady)");
  }
  PJRT_Error* event_error = nullptr;
  {
    std::unique_lock lock(wait->mutex);
    if (!wait->done.wait_for(lock, timeout, [&] { return wait->ready; })) {
      // The plugin still calls the callback later: it frees the error then, and keep_alive
      // (memory the plugin may still write) lives until it does.
      wait->abandoned = true;
      lock.unlock();
      Check(api_->PJRT_Event_Destroy(&destroy), "PJRT_Event_Destroy");
      throw Error(CHORUS_TIMEOUT, std::string(what) + ": PJRT plugin " + choice_.path +
                                      " did not complete it within " +
                                      std::to_string(timeout.count()) + " ms");
    }
    event_error = wait->error;
  }
  Check(api_->PJRT_Event_Destroy(&destroy), "PJRT_Event_Destroy");
  Check(event_error, what);
}

PjrtBuffer& PjrtBuffer::operator=(PjrtBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    library_ = std::move(other.library_);
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

void PjrtBuffer::Reset() {
  if (handle_ == nullptr) return;
  auto args = MakeArgs<PJRT_Buffer_Destroy_Args>();
  args.buffer = handle_;
  handle_ = nullptr;
  try {
    library_->Check(library_->api().PJRT_Buffer_Destroy(&args), "PJRT_Buffer_Destroy");
  } catch (const Error&) {
    // A destructor cannot report it; the plugin's message is lost with the handle.
  }
}

size_t PjrtBuffer::size_in_bytes() const {
  auto args = MakeArgs<PJRT_Buffer_OnDeviceSizeInBytes_Args>();
  args.buffer = handle_;
  library_->Check(library_->api().PJRT_Buffer_OnDeviceSizeInBytes(&args),
                  "PJRT_Buffer_OnDeviceSizeInBytes");
  return args.on_device_size_in_bytes;
}

PjrtClient::PjrtClient(std::shared_ptr<PjrtLibrary> library,
                       const std::vector<PjrtOption>& given_options, const PjrtJob* job)
    : library_(std::move(library)) {
  const PJRT_Api& api = library_->api();
  std::vector<PjrtOption> options = given_options;
  if (job != nullptr && job->num_processes > 1) {
    job_ = *job;
    // XLA's GPU plugin's names for its process and the processes; the user's own win.
    const std::pair<const char*, int64_t> process_options[] = {{"node_id", job->process_index},
                                                               {"num_nodes", job->num_processes}};
    for (const auto& process_option : process_options) {
      const std::string name = process_option.first;
      if (std::none_of(options.begin(), options.end(),
                       [&name](const PjrtOption& o) { return o.name == name; })) {
        PjrtOption option;
        option.name = name;
        option.type = PJRT_NamedValue_kInt64;
        option.int64_value = process_option.second;
        options.push_back(std::move(option));
      }
    }
  }
  std::vector<PJRT_NamedValue> values;
  std::string names;
  for (const PjrtOption& option : options) {
    if (option.omit) continue;
    PJRT_NamedValue value{};
    value.struct_size = sizeof(PJRT_NamedValue);
    value.name = option.name.c_str();
    value.name_size = option.name.size();
    value.type = option.type;
    value.value_size = 1;
    switch (option.type) {
      case PJRT_NamedValue_kString:
        value.string_value = option.string_value.c_str();
        value.value_size = option.string_value.size();
        break;
      case PJRT_NamedValue_kInt64:
        value.int64_value = option.int64_value;
        break;
      case PJRT_NamedValue_kInt64List:
        value.int64_array_value = option.int64_list.data();
        value.value_size = option.int64_list.size();
        break;
      case PJRT_NamedValue_kFloat:
        value.float_value = option.float_value;
        break;
      case PJRT_NamedValue_kBool:
        value.bool_value = option.bool_value;
        break;
    }
    values.push_back(value);
    names += (names.empty() ? "" : ", ") + option.name;
  }
  auto create = MakeArgs<PJRT_Client_Create_Args>();
  create.create_options = values.data();
  create.num_options = values.size();
  if (multi_process()) {
    create.kv_get_callback = KeyValueGet;
    create.kv_get_user_arg = &job_;
    create.kv_put_callback = KeyValuePut;
    create.kv_put_user_arg = &job_;
  }
  library_->Check(api.PJRT_Client_Create(&create),
                  "PJRT_Client_Create" +
                      (names.empty() ? std::string(" (no options)") : " (options: " + names + ")"));
  client_ = create.client;
  try {
    auto platform = MakeArgs<PJRT_Client_PlatformName_Args>();
    platform.client = client_;
    library_->Check(api.PJRT_Client_PlatformName(&platform), "PJRT_Client_PlatformName");
    platform_name_ = ViewString(platform.platform_name, platform.platform_name_size);
    auto version = MakeArgs<PJRT_Client_PlatformVersion_Args>();
    version.client = client_;
    library_->Check(api.PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion");
    platform_version_ = ViewString(version.platform_version, version.platform_version_size);
    auto process = MakeArgs<PJRT_Client_ProcessIndex_Args>();
    process.client = client_;
    library_->Check(api.PJRT_Client_ProcessIndex(&process), "PJRT_Client_ProcessIndex");
    process_index_ = process.process_index;

    auto all = MakeArgs<PJRT_Client_Devices_Args>();
    all.client = client_;
    library_->Check(api.PJRT_Client_Devices(&all), "PJRT_Client_Devices");
    global_device_count_ = all.num_devices;

    auto list = MakeArgs<PJRT_Client_AddressableDevices_Args>();
    list.client = client_;
    library_->Check(api.PJRT_Client_AddressableDevices(&list), "PJRT_Client_AddressableDevices");
    for (size_t i = 0; i < list.num_addressable_devices; ++i) {
      PjrtDevice device;
      device.handle = list.addressable_devices[i];
      auto description = MakeArgs<PJRT_Device_GetDescription_Args>();
      description.device = device.handle;
      library_->Check(api.PJRT_Device_GetDescription(&description), "PJRT_Device_GetDescription");
      auto id = MakeArgs<PJRT_DeviceDescription_Id_Args>();
      id.device_description = description.device_description;
      library_->Check(api.PJRT_DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id");
      device.id = id.id;
      auto index = MakeArgs<PJRT_DeviceDescription_ProcessIndex_Args>();
      index.device_description = description.device_description;
      library_->Check(api.PJRT_DeviceDescription_ProcessIndex(&index),
                      "PJRT_DeviceDescription_ProcessIndex");
      device.process_index = index.process_index;
      auto kind = MakeArgs<PJRT_DeviceDescription_Kind_Args>();
      kind.device_description = description.device_description;
      library_->Check(api.PJRT_DeviceDescription_Kind(&kind), "PJRT_DeviceDescription_Kind");
      device.kind = ViewString(kind.device_kind, kind.device_kind_size);
      auto hardware = MakeArgs<PJRT_Device_LocalHardwareId_Args>();
      hardware.device = device.handle;
      library_->Check(api.PJRT_Device_LocalHardwareId(&hardware), "PJRT_Device_LocalHardwareId");
      device.local_hardware_id = hardware.local_hardware_id;
      auto attributes = MakeArgs<PJRT_DeviceDescription_Attributes_Args>();
      attributes.device_description = description.device_description;
      library_->Check(api.PJRT_DeviceDescription_Attributes(&attributes),
                      "PJRT_DeviceDescription_Attributes");
      for (size_t a = 0; a < attributes.num_attributes; ++a) {
        const PJRT_NamedValue& attribute = attributes.attributes[a];
        if (ViewString(attribute.name, attribute.name_size) == "coords" &&
            attribute.type == PJRT_NamedValue_kInt64List) {
          device.coords.assign(attribute.int64_array_value,
                               attribute.int64_array_value + attribute.value_size);
        }
      }
      devices_.push_back(std::move(device));
    }
  } catch (...) {
    auto destroy = MakeArgs<PJRT_Client_Destroy_Args>();
    destroy.client = client_;
    PJRT_Error* error = api.PJRT_Client_Destroy(&destroy);
    if (error != nullptr) {
      auto free_error = MakeArgs<PJRT_Error_Destroy_Args>();
      free_error.error = error;
      api.PJRT_Error_Destroy(&free_error);
    }
    throw;
  }
}

PjrtClient::~PjrtClient() {
  auto destroy = MakeArgs<PJRT_Client_Destroy_Args>();
  destroy.client = client_;
  try {
    library_->Check(library_->api().PJRT_Client_Destroy(&destroy), "PJRT_Client_Destroy");
  } catch (const Error&) {
    // Nothing to tell from a destructor; the client is gone either way.
  }
}

PjrtBuffer PjrtClient::FromHost(const PjrtDevice& device, PJRT_Buffer_Type type, const void* data,
                                int64_t count, std::chrono::milliseconds timeout) const {
  auto args = MakeArgs<PJRT_Client_BufferFromHostBuffer_Args>();
  args.client = client_;
  args.data = data;
  args.type = type;
  args.dims = &count;
  args.num_dims = 1;
  // The plugin copies the bytes during the call: after a time-out below, the caller may free
  // `data` while a plugin that reads it later would not know.
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = device.handle;
  library_->Check(library_->api().PJRT_Client_BufferFromHostBuffer(&args),
                  "PJRT_Client_BufferFromHostBuffer");
  PjrtBuffer buffer(library_, args.buffer);
  if (args.done_with_host_buffer != nullptr) {
    library_->Await(
        args.done_with_host_buffer, timeout,
        "copying " + std::to_string(count) + " elements to device " + std::to_string(device.id));
  }
  return buffer;
}

void PjrtClient::ToHost(const PjrtBuffer& buffer, void* dst, size_t size,
                        std::chrono::milliseconds timeout) const {
  const size_t needed = buffer.size_in_bytes();
  if (size != needed) {
    throw Error(CHORUS_INVALID_ARGUMENT, "copying a PJRT buffer of " + std::to_string(needed) +
                                             " bytes to a host buffer of " + std::to_string(size) +
                                             " bytes");
  }
  if (size == 0) return;
  // The plugin writes into memory of chorus's own, copied to `dst` once the event is ready: after
  // a time-out the caller may free `dst`, and the plugin may still write later.
  auto staging = std::make_shared<std::vector<unsigned char>>(size);
  auto args = MakeArgs<PJRT_Buffer_ToHostBuffer_Args>();
  args.src = buffer.handle();
  args.dst = staging->data();
  args.dst_size = size;
  library_->Check(library_->api().PJRT_Buffer_ToHostBuffer(&args), "PJRT_Buffer_ToHostBuffer");
  if (args.event != nullptr) {
    library_->Await(args.event, timeout, "copying " + std::to_string(size) + " bytes to the host",
                    staging);
  }
  std::memcpy(dst, staging->data(), size);
}

PjrtExecutable::~PjrtExecutable() {
  auto args = MakeArgs<PJRT_LoadedExecutable_Destroy_Args>();
  args.executable = handle_;
  try {
    library_->Check(library_->api().PJRT_LoadedExecutable_Destroy(&args),
                    "PJRT_LoadedExecutable_Destroy");
  } catch (const Error&) {
    // A destructor cannot report it; the plugin's message is lost with the handle.
  }
}

PjrtBuffer PjrtClient::CopyToDevice(const PjrtBuffer& buffer, const PjrtDevice& device,
                                    std::chrono::milliseconds timeout) const {
  auto args = MakeArgs<PJRT_Buffer_CopyToDevice_Args>();
  args.buffer = buffer.handle();
  args.dst_device = device.handle;
  library_->Check(library_->api().PJRT_Buffer_CopyToDevice(&args),
                  "PJRT_Buffer_CopyToDevice to device " + std::to_string(device.id));
  PjrtBuffer copy(library_, args.dst_buffer);
  auto ready = MakeArgs<PJRT_Buffer_ReadyEvent_Args>();
  ready.buffer = copy.handle();
  library_->Check(library_->api().PJRT_Buffer_ReadyEvent(&ready), "PJRT_Buffer_ReadyEvent");
  library_->Await(ready.event, timeout, "copying a buffer to device " + std::to_string(device.id));
  return copy;
}

std::unique_ptr<PjrtExecutable> PjrtClient::Compile(const std::string& mlir, int num_replicas,
                                                    bool portable,
                                                    const std::vector<int64_t>& device_ids) const {
  const PJRT_Api& api = library_->api();
  std::string code = mlir;  // PJRT_Program.code is not const
  PJRT_Program program{};
  program.struct_size = sizeof(program);
  program.code = code.data();
  program.code_size = code.size();
  constexpr char kFormat[] = "mlir";
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  const std::string options = CompileOptionsProto(num_replicas, portable, device_ids);
  auto compile = MakeArgs<PJRT_Client_Compile_Args>();
  compile.client = client_;
  compile.program = &program;
  compile.compile_options = options.data();
  compile.compile_options_size = options.size();
  library_->Check(api.PJRT_Client_Compile(&compile),
                  "PJRT_Client_Compile of a " + std::to_string(num_replicas) + "-replica program");
  auto loaded = std::make_unique<PjrtExecutable>(library_, compile.executable, 0);
  auto get = MakeArgs<PJRT_LoadedExecutable_GetExecutable_Args>();
  get.loaded_executable = loaded->handle();
  library_->Check(api.PJRT_LoadedExecutable_GetExecutable(&get),
                  "PJRT_LoadedExecutable_GetExecutable");
  auto outputs = MakeArgs<PJRT_Executable_NumOutputs_Args>();
  outputs.executable = get.executable;
  PJRT_Error* error = api.PJRT_Executable_NumOutputs(&outputs);
  auto destroy = MakeArgs<PJRT_Executable_Destroy_Args>();
  destroy.executable = get.executable;
  PJRT_Error* destroy_error = api.PJRT_Executable_Destroy(&destroy);
  library_->Check(error, "PJRT_Executable_NumOutputs");
  library_->Check(destroy_error, "PJRT_Executable_Destroy");
  loaded->num_outputs_ = outputs.num_outputs;
  return loaded;
}

std::vector<std::vector<PjrtBuffer>> PjrtClient::Execute(
    const PjrtExecutable& executable, const std::vector<std::vector<PJRT_Buffer*>>& arguments,
    std::chrono::milliseconds timeout, const PjrtDevice* device) const {
  const size_t devices = arguments.size();
  const size_t num_args = devices == 0 ? 0 : arguments.front().size();
  std::vector<PJRT_Buffer* const*> argument_lists;
  for (const auto& list : arguments) argument_lists.push_back(list.data());
  std::vector<std::vector<PJRT_Buffer*>> outputs(
      devices, std::vector<PJRT_Buffer*>(executable.num_outputs(), nullptr));
  std::vector<PJRT_Buffer**> output_lists;
  for (auto& list : outputs) output_lists.push_back(list.data());
  std::vector<PJRT_Event*> done(devices, nullptr);
  PJRT_ExecuteOptions options{};
  options.struct_size = sizeof(options);
  auto args = MakeArgs<PJRT_LoadedExecutable_Execute_Args>();
  args.executable = executable.handle();
  args.options = &options;
  args.argument_lists = argument_lists.data();
  args.num_devices = devices;
  args.num_args = num_args;
  args.output_lists = output_lists.data();
  args.device_complete_events = done.data();
  args.execute_device = device != nullptr ? device->handle : nullptr;
  library_->Check(library_->api().PJRT_LoadedExecutable_Execute(&args),
                  "PJRT_LoadedExecutable_Execute on " + std::to_string(devices) + " devices");
  std::vector<std::vector<PjrtBuffer>> results(devices);
  for (size_t d = 0; d < devices; ++d) {
    for (PJRT_Buffer* buffer : outputs[d]) results[d].emplace_back(library_, buffer);
  }
  // Every event is awaited (and so destroyed) even when an earlier one failed.
  std::exception_ptr first_failure;
  for (size_t d = 0; d < devices; ++d) {
    if (done[d] == nullptr) continue;
    try {
      library_->Await(done[d], timeout, "running a program on device " + std::to_string(d));
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
  return results;
}

}  // namespace chorus::tpu
