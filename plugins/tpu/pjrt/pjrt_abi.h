// The part of the PJRT C API chorus uses, declared by chorus from the documented ABI (major 0):
// no Debian package ships XLA's pjrt_c_api.h. A PJRT plugin (libtpu, JAX's CUDA plugin, chorus's
// reference plugin) exports `const PJRT_Api* GetPjrtApi(void)`; everything else is reached through
// that table.
//
// Layout rules this file keeps (the PJRT ABI's own):
// - every argument struct starts with `struct_size` and an extension pointer; a caller sets
//   struct_size to the size it was built with, and a plugin refuses a size smaller than its own;
// - the PJRT_Api table is append-only: chorus declares its slots up to the last one it calls, in
//   the ABI's order, and checks that the plugin's table is at least that long;
// - slots chorus does not call are declared as `PjrtUnusedSlot` so the order stays visible.
// Names follow the ABI's (PJRT_*) so a reader can compare them with PJRT's documentation; they
// live in namespace chorus::pjrt so they never meet XLA's own header in one translation unit.
#ifndef CHORUS_PLUGINS_TPU_PJRT_ABI_H_
#define CHORUS_PLUGINS_TPU_PJRT_ABI_H_

#include <cstddef>
#include <cstdint>

namespace chorus::pjrt {

// The struct size of `type` up to and including `field`, as the ABI defines it.
#define CHORUS_PJRT_STRUCT_SIZE(type, field) \
  (offsetof(type, field) + sizeof(static_cast<type*>(nullptr)->field))

// The API version these declarations describe: every struct and slot below exists at this minor.
inline constexpr int kPjrtMajor = 0;
inline constexpr int kPjrtMinor = 40;

extern "C" {

struct PJRT_Error;
struct PJRT_Event;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Memory;
struct PJRT_DeviceDescription;
struct PJRT_LoadedExecutable;
struct PJRT_Buffer;
struct PJRT_Buffer_MemoryLayout;  // only passed as nullptr (dense, major-to-minor)
struct PJRT_ExecuteOptions;

using PjrtUnusedSlot = void*;

struct PJRT_Api_Version {
  size_t struct_size;
  void* extension_start;
  int major_version;
  int minor_version;
};

// ----- Errors: the plugin allocates them; the caller frees each with PJRT_Error_Destroy.
struct PJRT_Error_Destroy_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Error* error;
};
using PJRT_Error_Destroy_Fn = void(PJRT_Error_Destroy_Args*);

struct PJRT_Error_Message_Args {
  size_t struct_size;
  void* extension_start;
  const PJRT_Error* error;
  const char* message;  // out; lives as long as `error`
  size_t message_size;  // out
};
using PJRT_Error_Message_Fn = void(PJRT_Error_Message_Args*);

// absl's status codes.
enum PJRT_Error_Code : int {
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
};

struct PJRT_Error_GetCode_Args {
  size_t struct_size;
  void* extension_start;
  const PJRT_Error* error;
  PJRT_Error_Code code;  // out
};
using PJRT_Error_GetCode_Fn = PJRT_Error*(PJRT_Error_GetCode_Args*);

// Handed to the caller's callbacks so they can return an error the plugin owns.
using PJRT_CallbackError = PJRT_Error*(PJRT_Error_Code code, const char* message,
                                       size_t message_size);

// ----- Named values: client options and attributes.
enum PJRT_NamedValue_Type : int {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
};

struct PJRT_NamedValue {
  size_t struct_size;
  void* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // elements of a string or list; 1 for a scalar
};

// ----- Plugin.
struct PJRT_Plugin_Initialize_Args {
  size_t struct_size;
  void* extension_start;
};
using PJRT_Plugin_Initialize_Fn = PJRT_Error*(PJRT_Plugin_Initialize_Args*);

struct PJRT_Plugin_Attributes_Args {
  size_t struct_size;
  void* extension_start;
  const PJRT_NamedValue* attributes;  // out; lives as long as the process
  size_t num_attributes;              // out
};
using PJRT_Plugin_Attributes_Fn = PJRT_Error*(PJRT_Plugin_Attributes_Args*);

// ----- Events: the caller destroys every event it is given.
struct PJRT_Event_Destroy_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Event* event;
};
using PJRT_Event_Destroy_Fn = PJRT_Error*(PJRT_Event_Destroy_Args*);

struct PJRT_Event_IsReady_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Event* event;
  bool is_ready;  // out
};
using PJRT_Event_IsReady_Fn = PJRT_Error*(PJRT_Event_IsReady_Args*);

struct PJRT_Event_Error_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Event* event;
};
using PJRT_Event_Error_Fn = PJRT_Error*(PJRT_Event_Error_Args*);

struct PJRT_Event_Await_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Event* event;
};
using PJRT_Event_Await_Fn = PJRT_Error*(PJRT_Event_Await_Args*);

// Called once the event is ready, on any thread, with the event's error (owned by the callback).
using PJRT_Event_OnReadyCallback = void (*)(PJRT_Error* error, void* user_arg);

struct PJRT_Event_OnReady_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
};
using PJRT_Event_OnReady_Fn = PJRT_Error*(PJRT_Event_OnReady_Args*);

// ----- Client. The key-value callbacks let a multi-process client share data across processes.
using PJRT_KeyValueGetCallback_ValueDeleter = void (*)(char* value);

struct PJRT_KeyValueGetCallback_Args {
  size_t struct_size;
  void* extension_start;
  const char* key;
  size_t key_size;
  int timeout_in_ms;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;                                                   // out
  size_t value_size;                                             // out
  PJRT_KeyValueGetCallback_ValueDeleter value_deleter_callback;  // out
};
using PJRT_KeyValueGetCallback = PJRT_Error* (*)(PJRT_KeyValueGetCallback_Args*);

struct PJRT_KeyValuePutCallback_Args {
  size_t struct_size;
  void* extension_start;
  const char* key;
  size_t key_size;
  const char* value;  // lives for the call
  size_t value_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
};
using PJRT_KeyValuePutCallback = PJRT_Error* (*)(PJRT_KeyValuePutCallback_Args*);

struct PJRT_Client_Create_Args {
  size_t struct_size;
  void* extension_start;
  const PJRT_NamedValue* create_options;  // lives for the call
  size_t num_options;
  PJRT_KeyValueGetCallback kv_get_callback;
  void* kv_get_user_arg;
  PJRT_KeyValuePutCallback kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
};
using PJRT_Client_Create_Fn = PJRT_Error*(PJRT_Client_Create_Args*);

struct PJRT_Client_Destroy_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
};
using PJRT_Client_Destroy_Fn = PJRT_Error*(PJRT_Client_Destroy_Args*);

struct PJRT_Client_PlatformName_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
  const char* platform_name;  // out; owned by the client
  size_t platform_name_size;  // out
};
using PJRT_Client_PlatformName_Fn = PJRT_Error*(PJRT_Client_PlatformName_Args*);

struct PJRT_Client_ProcessIndex_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
  int process_index;  // out
};
using PJRT_Client_ProcessIndex_Fn = PJRT_Error*(PJRT_Client_ProcessIndex_Args*);

struct PJRT_Client_PlatformVersion_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
  const char* platform_version;  // out; owned by the client
  size_t platform_version_size;  // out
};
using PJRT_Client_PlatformVersion_Fn = PJRT_Error*(PJRT_Client_PlatformVersion_Args*);

struct PJRT_Client_Devices_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
  PJRT_Device* const* devices;  // out; owned by the client
  size_t num_devices;           // out
};
using PJRT_Client_Devices_Fn = PJRT_Error*(PJRT_Client_Devices_Args*);

struct PJRT_Client_AddressableDevices_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;  // out; owned by the client
  size_t num_addressable_devices;           // out
};
using PJRT_Client_AddressableDevices_Fn = PJRT_Error*(PJRT_Client_AddressableDevices_Args*);

struct PJRT_Program {
  size_t struct_size;
  void* extension_start;
  char* code;  // owned by the caller
  size_t code_size;
  const char* format;  // "mlir" (StableHLO text or bytecode), "hlo", ...
  size_t format_size;
};

struct PJRT_Client_Compile_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
  const PJRT_Program* program;  // lives for the call
  const char* compile_options;  // a serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
};
using PJRT_Client_Compile_Fn = PJRT_Error*(PJRT_Client_Compile_Args*);

// XLA's primitive types, in the ABI's order.
enum PJRT_Buffer_Type : int {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED,
  PJRT_Buffer_Type_S8,
  PJRT_Buffer_Type_S16,
  PJRT_Buffer_Type_S32,
  PJRT_Buffer_Type_S64,
  PJRT_Buffer_Type_U8,
  PJRT_Buffer_Type_U16,
  PJRT_Buffer_Type_U32,
  PJRT_Buffer_Type_U64,
  PJRT_Buffer_Type_F16,
  PJRT_Buffer_Type_F32,
  PJRT_Buffer_Type_F64,
  PJRT_Buffer_Type_BF16,
};

enum PJRT_HostBufferSemantics : int {
  // The plugin copies `data` before the call returns.
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  // The caller keeps `data` unchanged until `done_with_host_buffer` is ready.
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  PJRT_HostBufferSemantics_kZeroCopy = 2,
};

struct PJRT_Client_BufferFromHostBuffer_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // nullptr: dense, major-to-minor
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;                      // nullptr: the device's default memory
  PJRT_Buffer_MemoryLayout* device_layout;  // nullptr: dense, major-to-minor
  PJRT_Event* done_with_host_buffer;        // out; the caller destroys it
  PJRT_Buffer* buffer;                      // out; the caller destroys it
};
using PJRT_Client_BufferFromHostBuffer_Fn = PJRT_Error*(PJRT_Client_BufferFromHostBuffer_Args*);

// ----- Devices and their descriptions.
struct PJRT_DeviceDescription_Id_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_DeviceDescription* device_description;
  int id;  // out
};
using PJRT_DeviceDescription_Id_Fn = PJRT_Error*(PJRT_DeviceDescription_Id_Args*);

struct PJRT_DeviceDescription_ProcessIndex_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_DeviceDescription* device_description;
  int process_index;  // out
};
using PJRT_DeviceDescription_ProcessIndex_Fn =
    PJRT_Error*(PJRT_DeviceDescription_ProcessIndex_Args*);

struct PJRT_DeviceDescription_Attributes_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_DeviceDescription* device_description;
  size_t num_attributes;              // out
  const PJRT_NamedValue* attributes;  // out; lives as long as the device ("coords", ...)
};
using PJRT_DeviceDescription_Attributes_Fn = PJRT_Error*(PJRT_DeviceDescription_Attributes_Args*);

struct PJRT_DeviceDescription_Kind_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_DeviceDescription* device_description;
  const char* device_kind;  // out; lives as long as the device
  size_t device_kind_size;  // out
};
using PJRT_DeviceDescription_Kind_Fn = PJRT_Error*(PJRT_DeviceDescription_Kind_Args*);

struct PJRT_Device_GetDescription_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;  // out
};
using PJRT_Device_GetDescription_Fn = PJRT_Error*(PJRT_Device_GetDescription_Args*);

struct PJRT_Device_IsAddressable_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Device* device;
  bool is_addressable;  // out
};
using PJRT_Device_IsAddressable_Fn = PJRT_Error*(PJRT_Device_IsAddressable_Args*);

struct PJRT_Device_LocalHardwareId_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Device* device;
  int local_hardware_id;  // out; -1 when undefined
};
using PJRT_Device_LocalHardwareId_Fn = PJRT_Error*(PJRT_Device_LocalHardwareId_Args*);

// ----- Buffers: immutable device arrays the caller destroys.
struct PJRT_Buffer_Destroy_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
};
using PJRT_Buffer_Destroy_Fn = PJRT_Error*(PJRT_Buffer_Destroy_Args*);

struct PJRT_Buffer_ElementType_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type type;  // out
};
using PJRT_Buffer_ElementType_Fn = PJRT_Error*(PJRT_Buffer_ElementType_Args*);

struct PJRT_Buffer_Dimensions_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
  const int64_t* dims;  // out; lives as long as the buffer
  size_t num_dims;      // out
};
using PJRT_Buffer_Dimensions_Fn = PJRT_Error*(PJRT_Buffer_Dimensions_Args*);

struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
  size_t on_device_size_in_bytes;  // out
};
using PJRT_Buffer_OnDeviceSizeInBytes_Fn = PJRT_Error*(PJRT_Buffer_OnDeviceSizeInBytes_Args*);

struct PJRT_Buffer_Device_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Device* device;  // out
};
using PJRT_Buffer_Device_Fn = PJRT_Error*(PJRT_Buffer_Device_Args*);

struct PJRT_Buffer_Delete_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
};
using PJRT_Buffer_Delete_Fn = PJRT_Error*(PJRT_Buffer_Delete_Args*);

struct PJRT_Buffer_IsDeleted_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
  bool is_deleted;  // out
};
using PJRT_Buffer_IsDeleted_Fn = PJRT_Error*(PJRT_Buffer_IsDeleted_Args*);

// Copies a buffer to another device of the same client, without the host.
struct PJRT_Buffer_CopyToDevice_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer;  // out; the caller destroys it
};
using PJRT_Buffer_CopyToDevice_Fn = PJRT_Error*(PJRT_Buffer_CopyToDevice_Args*);

struct PJRT_Buffer_ToHostBuffer_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // nullptr: the buffer's own (dense) layout
  void* dst;                              // nullptr: only report dst_size
  size_t dst_size;                        // in/out
  PJRT_Event* event;                      // out; ready when dst holds the bytes
};
using PJRT_Buffer_ToHostBuffer_Fn = PJRT_Error*(PJRT_Buffer_ToHostBuffer_Args*);

struct PJRT_Buffer_ReadyEvent_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Event* event;  // out
};
using PJRT_Buffer_ReadyEvent_Fn = PJRT_Error*(PJRT_Buffer_ReadyEvent_Args*);

// ----- Executables. A loaded executable (what Compile returns) runs on the devices of its device
// assignment; the caller destroys it, and every PJRT_Executable it asks for.
struct PJRT_Executable;

struct PJRT_Executable_Destroy_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Executable* executable;
};
using PJRT_Executable_Destroy_Fn = PJRT_Error*(PJRT_Executable_Destroy_Args*);

struct PJRT_Executable_NumOutputs_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;  // out: outputs per device
};
using PJRT_Executable_NumOutputs_Fn = PJRT_Error*(PJRT_Executable_NumOutputs_Args*);

struct PJRT_LoadedExecutable_Destroy_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_LoadedExecutable* executable;
};
using PJRT_LoadedExecutable_Destroy_Fn = PJRT_Error*(PJRT_LoadedExecutable_Destroy_Args*);

struct PJRT_LoadedExecutable_GetExecutable_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out; the caller destroys it
};
using PJRT_LoadedExecutable_GetExecutable_Fn =
    PJRT_Error*(PJRT_LoadedExecutable_GetExecutable_Args*);

struct PJRT_ExecuteOptions {
  size_t struct_size;
  void* extension_start;
  void** send_callbacks;  // host send/recv callbacks: chorus's programs have none
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;  // lives for the call
  size_t num_non_donatable_input_indices;
};

struct PJRT_LoadedExecutable_Execute_Args {
  size_t struct_size;
  void* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;               // lives for the call
  PJRT_Buffer* const* const* argument_lists;  // [num_devices][num_args], lives for the call
  size_t num_devices;
  size_t num_args;
  // [num_devices][num_outputs], allocated by the caller; the plugin fills in buffers the caller
  // destroys.
  PJRT_Buffer** const* output_lists;
  PJRT_Event** device_complete_events;  // [num_devices] or nullptr; the caller destroys them
  PJRT_Device* execute_device;          // nullptr: the devices of the compile-time assignment
};
using PJRT_LoadedExecutable_Execute_Fn = PJRT_Error*(PJRT_LoadedExecutable_Execute_Args*);

// The function table GetPjrtApi returns, up to the last slot chorus calls.
struct PJRT_Api {
  size_t struct_size;
  void* extension_start;
  PJRT_Api_Version pjrt_api_version;

  PJRT_Error_Destroy_Fn* PJRT_Error_Destroy;
  PJRT_Error_Message_Fn* PJRT_Error_Message;
  PJRT_Error_GetCode_Fn* PJRT_Error_GetCode;

  PJRT_Plugin_Initialize_Fn* PJRT_Plugin_Initialize;
  PJRT_Plugin_Attributes_Fn* PJRT_Plugin_Attributes;

  PJRT_Event_Destroy_Fn* PJRT_Event_Destroy;
  PJRT_Event_IsReady_Fn* PJRT_Event_IsReady;
  PJRT_Event_Error_Fn* PJRT_Event_Error;
  PJRT_Event_Await_Fn* PJRT_Event_Await;
  PJRT_Event_OnReady_Fn* PJRT_Event_OnReady;

  PJRT_Client_Create_Fn* PJRT_Client_Create;
  PJRT_Client_Destroy_Fn* PJRT_Client_Destroy;
  PJRT_Client_PlatformName_Fn* PJRT_Client_PlatformName;
  PJRT_Client_ProcessIndex_Fn* PJRT_Client_ProcessIndex;
  PJRT_Client_PlatformVersion_Fn* PJRT_Client_PlatformVersion;
  PJRT_Client_Devices_Fn* PJRT_Client_Devices;
  PJRT_Client_AddressableDevices_Fn* PJRT_Client_AddressableDevices;
  PjrtUnusedSlot PJRT_Client_LookupDevice;
  PjrtUnusedSlot PJRT_Client_LookupAddressableDevice;
  PjrtUnusedSlot PJRT_Client_AddressableMemories;
  PJRT_Client_Compile_Fn* PJRT_Client_Compile;
  PjrtUnusedSlot PJRT_Client_DefaultDeviceAssignment;
  PJRT_Client_BufferFromHostBuffer_Fn* PJRT_Client_BufferFromHostBuffer;

  PJRT_DeviceDescription_Id_Fn* PJRT_DeviceDescription_Id;
  PJRT_DeviceDescription_ProcessIndex_Fn* PJRT_DeviceDescription_ProcessIndex;
  PJRT_DeviceDescription_Attributes_Fn* PJRT_DeviceDescription_Attributes;
  PJRT_DeviceDescription_Kind_Fn* PJRT_DeviceDescription_Kind;
  PjrtUnusedSlot PJRT_DeviceDescription_DebugString;
  PjrtUnusedSlot PJRT_DeviceDescription_ToString;

  PJRT_Device_GetDescription_Fn* PJRT_Device_GetDescription;
  PJRT_Device_IsAddressable_Fn* PJRT_Device_IsAddressable;
  PJRT_Device_LocalHardwareId_Fn* PJRT_Device_LocalHardwareId;
  PjrtUnusedSlot PJRT_Device_AddressableMemories;
  PjrtUnusedSlot PJRT_Device_DefaultMemory;
  PjrtUnusedSlot PJRT_Device_MemoryStats;

  PjrtUnusedSlot PJRT_Memory_Id;
  PjrtUnusedSlot PJRT_Memory_Kind;
  PjrtUnusedSlot PJRT_Memory_DebugString;
  PjrtUnusedSlot PJRT_Memory_ToString;
  PjrtUnusedSlot PJRT_Memory_AddressableByDevices;

  PJRT_Executable_Destroy_Fn* PJRT_Executable_Destroy;
  PjrtUnusedSlot PJRT_Executable_Name;
  PjrtUnusedSlot PJRT_Executable_NumReplicas;
  PjrtUnusedSlot PJRT_Executable_NumPartitions;
  PJRT_Executable_NumOutputs_Fn* PJRT_Executable_NumOutputs;
  PjrtUnusedSlot PJRT_Executable_SizeOfGeneratedCodeInBytes;
  PjrtUnusedSlot PJRT_Executable_GetCostAnalysis;
  PjrtUnusedSlot PJRT_Executable_OutputMemoryKinds;
  PjrtUnusedSlot PJRT_Executable_OptimizedProgram;
  PjrtUnusedSlot PJRT_Executable_Serialize;

  PJRT_LoadedExecutable_Destroy_Fn* PJRT_LoadedExecutable_Destroy;
  PJRT_LoadedExecutable_GetExecutable_Fn* PJRT_LoadedExecutable_GetExecutable;
  PjrtUnusedSlot PJRT_LoadedExecutable_AddressableDevices;
  PjrtUnusedSlot PJRT_LoadedExecutable_Delete;
  PjrtUnusedSlot PJRT_LoadedExecutable_IsDeleted;
  PJRT_LoadedExecutable_Execute_Fn* PJRT_LoadedExecutable_Execute;
  PjrtUnusedSlot PJRT_Executable_DeserializeAndLoad;
  PjrtUnusedSlot PJRT_LoadedExecutable_Fingerprint;

  PJRT_Buffer_Destroy_Fn* PJRT_Buffer_Destroy;
  PJRT_Buffer_ElementType_Fn* PJRT_Buffer_ElementType;
  PJRT_Buffer_Dimensions_Fn* PJRT_Buffer_Dimensions;
  PjrtUnusedSlot PJRT_Buffer_UnpaddedDimensions;
  PjrtUnusedSlot PJRT_Buffer_DynamicDimensionIndices;
  PjrtUnusedSlot PJRT_Buffer_GetMemoryLayout;
  PJRT_Buffer_OnDeviceSizeInBytes_Fn* PJRT_Buffer_OnDeviceSizeInBytes;
  PJRT_Buffer_Device_Fn* PJRT_Buffer_Device;
  PjrtUnusedSlot PJRT_Buffer_Memory;
  PJRT_Buffer_Delete_Fn* PJRT_Buffer_Delete;
  PJRT_Buffer_IsDeleted_Fn* PJRT_Buffer_IsDeleted;
  PJRT_Buffer_CopyToDevice_Fn* PJRT_Buffer_CopyToDevice;
  PJRT_Buffer_ToHostBuffer_Fn* PJRT_Buffer_ToHostBuffer;
  PjrtUnusedSlot PJRT_Buffer_IsOnCpu;
  PJRT_Buffer_ReadyEvent_Fn* PJRT_Buffer_ReadyEvent;
};

// The plugin's one entry symbol.
using GetPjrtApiFunction = const PJRT_Api*();
inline constexpr const char kGetPjrtApiSymbol[] = "GetPjrtApi";

}  // extern "C"

// The table length chorus needs: a plugin whose struct_size is smaller lacks a slot chorus calls.
inline constexpr size_t kPjrtApiSizeNeeded =
    CHORUS_PJRT_STRUCT_SIZE(PJRT_Api, PJRT_Buffer_ReadyEvent);

// Each slot's function type is PJRT_<name>_Fn (C++ cannot give a member its type's name).
// Slot positions of the ABI (64-bit): a slot declared out of order would call the wrong function.
static_assert(sizeof(void*) == 8, "the PJRT ABI as declared here is for 64-bit platforms");
static_assert(offsetof(PJRT_Api, PJRT_Error_Destroy) == 40);
static_assert(offsetof(PJRT_Api, PJRT_Client_Create) == 40 + 8 * 10);
static_assert(offsetof(PJRT_Api, PJRT_Client_BufferFromHostBuffer) == 40 + 8 * 22);
static_assert(offsetof(PJRT_Api, PJRT_Device_GetDescription) == 40 + 8 * 29);
static_assert(offsetof(PJRT_Api, PJRT_Executable_Destroy) == 40 + 8 * 40);
static_assert(offsetof(PJRT_Api, PJRT_LoadedExecutable_Execute) == 40 + 8 * 55);
static_assert(offsetof(PJRT_Api, PJRT_Buffer_Destroy) == 40 + 8 * 58);
static_assert(offsetof(PJRT_Api, PJRT_Buffer_CopyToDevice) == 40 + 8 * 69);
static_assert(offsetof(PJRT_Api, PJRT_Buffer_ReadyEvent) == 40 + 8 * 72);
static_assert(offsetof(PJRT_NamedValue, type) == 32 && offsetof(PJRT_NamedValue, value_size) == 48);

}  // namespace chorus::pjrt

#endif  // CHORUS_PLUGINS_TPU_PJRT_ABI_H_
