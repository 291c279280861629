// The reference PJRT plugin keeps the ABI's rules as real plugins do, called directly through its
// table: argument structs smaller than its own refused, handles used after destroy an error (not
// a crash), immutable buffers that can be deleted, events completed on its worker thread, a
// clear UNIMPLEMENTED for what it does not do, and multi-process clients (node_id, num_nodes): two
// nodes in one process exchanging their devices through an in-memory key-value store, with global
// device ids, and nothing put or run on another process's device.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pjrt_abi.h"

namespace chorus::pjrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const PJRT_Api& Api() {
  static const PJRT_Api* api = [] {
    void* library = ::dlopen(PJRT_REFERENCE_PATH, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(library, nullptr) << ::dlerror();
    auto* get = reinterpret_cast<GetPjrtApiFunction*>(::dlsym(library, kGetPjrtApiSymbol));
    return get();
  }();
  return *api;
}

template <typename Args>
Args Sized() {
  Args args{};
  args.struct_size = sizeof(Args);
  return args;
}

// The error's code and message, and frees it; {0, ""} for no error.
std::pair<int, std::string> Take(PJRT_Error* error) {
  if (error == nullptr) return {0, ""};
  auto message = Sized<PJRT_Error_Message_Args>();
  message.error = error;
  Api().PJRT_Error_Message(&message);
  auto code = Sized<PJRT_Error_GetCode_Args>();
  code.error = error;
  EXPECT_EQ(Api().PJRT_Error_GetCode(&code), nullptr);
  std::pair<int, std::string> taken{code.code, std::string(message.message, message.message_size)};
  auto destroy = Sized<PJRT_Error_Destroy_Args>();
  destroy.error = error;
  Api().PJRT_Error_Destroy(&destroy);
  return taken;
}

class ReferencePjrt : public ::testing::Test {
 protected:
  void SetUp() override {
    auto create = Sized<PJRT_Client_Create_Args>();
    ASSERT_EQ(Take(Api().PJRT_Client_Create(&create)).first, 0);
    client_ = create.client;
    auto devices = Sized<PJRT_Client_AddressableDevices_Args>();
    devices.client = client_;
    ASSERT_EQ(Take(Api().PJRT_Client_AddressableDevices(&devices)).first, 0);
    ASSERT_EQ(devices.num_addressable_devices, 4u);
    device_ = devices.addressable_devices[0];
  }
  void TearDown() override {
    auto destroy = Sized<PJRT_Client_Destroy_Args>();
    destroy.client = client_;
    EXPECT_EQ(Take(Api().PJRT_Client_Destroy(&destroy)).first, 0);
  }
  PJRT_Buffer* MakeBuffer(const float* data, int64_t count) {
    auto args = Sized<PJRT_Client_BufferFromHostBuffer_Args>();
    args.client = client_;
    args.data = data;
    args.type = PJRT_Buffer_Type_F32;
    args.dims = &count;
    args.num_dims = 1;
    args.device = device_;
    EXPECT_EQ(Take(Api().PJRT_Client_BufferFromHostBuffer(&args)).first, 0);
    DestroyEvent(args.done_with_host_buffer);
    return args.buffer;
  }
  static void DestroyEvent(PJRT_Event* event) {
    auto destroy = Sized<PJRT_Event_Destroy_Args>();
    destroy.event = event;
    EXPECT_EQ(Take(Api().PJRT_Event_Destroy(&destroy)).first, 0);
  }
  static void DestroyBuffer(PJRT_Buffer* buffer) {
    auto destroy = Sized<PJRT_Buffer_Destroy_Args>();
    destroy.buffer = buffer;
    EXPECT_EQ(Take(Api().PJRT_Buffer_Destroy(&destroy)).first, 0);
  }
  PJRT_Client* client_ = nullptr;
  PJRT_Device* device_ = nullptr;
};

TEST_F(ReferencePjrt, AnArgumentStructSmallerThanItsOwnIsRefused) {
  auto args = Sized<PJRT_Client_PlatformName_Args>();
  args.client = client_;
  args.struct_size = offsetof(PJRT_Client_PlatformName_Args, platform_name);
  const auto [code, message] = Take(Api().PJRT_Client_PlatformName(&args));
  EXPECT_EQ(code, PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("PJRT_Client_PlatformName_Args: struct_size 24 is smaller than"));
  EXPECT_THAT(message, HasSubstr("older PJRT C API"));
}

TEST_F(ReferencePjrt, AHandleUsedAfterDestroyIsAnErrorNotACrash) {
  const float data[2] = {1, 2};
  PJRT_Buffer* buffer = MakeBuffer(data, 2);
  DestroyBuffer(buffer);
  auto dims = Sized<PJRT_Buffer_Dimensions_Args>();
  dims.buffer = buffer;
  const auto [code, message] = Take(Api().PJRT_Buffer_Dimensions(&dims));
  EXPECT_EQ(code, PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_THAT(message, HasSubstr("not a live handle"));
  auto destroy_again = Sized<PJRT_Buffer_Destroy_Args>();
  destroy_again.buffer = buffer;
  EXPECT_EQ(Take(Api().PJRT_Buffer_Destroy(&destroy_again)).first,
            PJRT_Error_Code_INVALID_ARGUMENT);
}

TEST_F(ReferencePjrt, ADeletedBufferCannotBeReadButCanBeAsked) {
  const float data[2] = {1, 2};
  PJRT_Buffer* buffer = MakeBuffer(data, 2);
  auto remove = Sized<PJRT_Buffer_Delete_Args>();
  remove.buffer = buffer;
  EXPECT_EQ(Take(Api().PJRT_Buffer_Delete(&remove)).first, 0);
  auto deleted = Sized<PJRT_Buffer_IsDeleted_Args>();
  deleted.buffer = buffer;
  EXPECT_EQ(Take(Api().PJRT_Buffer_IsDeleted(&deleted)).first, 0);
  EXPECT_TRUE(deleted.is_deleted);
  float back[2];
  auto to_host = Sized<PJRT_Buffer_ToHostBuffer_Args>();
  to_host.src = buffer;
  to_host.dst = back;
  to_host.dst_size = sizeof(back);
  const auto [code, message] = Take(Api().PJRT_Buffer_ToHostBuffer(&to_host));
  EXPECT_EQ(code, PJRT_Error_Code_FAILED_PRECONDITION);
  EXPECT_THAT(message, HasSubstr("deleted"));
  DestroyBuffer(buffer);
}

TEST_F(ReferencePjrt, CopiesCompleteOnItsWorkerThreadThroughOnReady) {
  const float data[3] = {1, 2, 3};
  PJRT_Buffer* buffer = MakeBuffer(data, 3);
  float back[3] = {};
  auto to_host = Sized<PJRT_Buffer_ToHostBuffer_Args>();
  to_host.src = buffer;
  to_host.dst = back;
  to_host.dst_size = sizeof(back);
  ASSERT_EQ(Take(Api().PJRT_Buffer_ToHostBuffer(&to_host)).first, 0);
  struct Seen {
    std::promise<std::thread::id> thread;
    std::atomic<int> calls{0};
  } seen;
  auto on_ready = Sized<PJRT_Event_OnReady_Args>();
  on_ready.event = to_host.event;
  on_ready.user_arg = &seen;
  on_ready.callback = [](PJRT_Error* error, void* user_arg) {
    auto* s = static_cast<Seen*>(user_arg);
    EXPECT_EQ(error, nullptr);
    if (s->calls.fetch_add(1) == 0) s->thread.set_value(std::this_thread::get_id());
  };
  ASSERT_EQ(Take(Api().PJRT_Event_OnReady(&on_ready)).first, 0);
  auto future = seen.thread.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto await = Sized<PJRT_Event_Await_Args>();
  await.event = to_host.event;
  EXPECT_EQ(Take(Api().PJRT_Event_Await(&await)).first, 0);
  EXPECT_EQ(seen.calls.load(), 1);
  EXPECT_EQ(back[2], 3.0f);
  DestroyEvent(to_host.event);
  DestroyBuffer(buffer);
}

TEST_F(ReferencePjrt, WhatItDoesNotDoIsUnimplementedSayingWhat) {
  std::string hlo = "HloModule m";
  PJRT_Program program{};
  program.struct_size = sizeof(program);
  program.code = hlo.data();
  program.code_size = hlo.size();
  program.format = "hlo";
  program.format_size = 3;
  auto compile = Sized<PJRT_Client_Compile_Args>();
  compile.client = client_;
  compile.program = &program;
  const auto [code, message] = Take(Api().PJRT_Client_Compile(&compile));
  EXPECT_EQ(code, PJRT_Error_Code_UNIMPLEMENTED);
  EXPECT_THAT(message, HasSubstr("program format 'hlo'; only 'mlir'"));

  int64_t count = 2;
  const int32_t data[2] = {1, 2};
  auto complex = Sized<PJRT_Client_BufferFromHostBuffer_Args>();
  complex.client = client_;
  complex.data = data;
  complex.type = static_cast<PJRT_Buffer_Type>(14);  // C64 in the ABI
  complex.dims = &count;
  complex.num_dims = 1;
  complex.device = device_;
  const auto [type_code, type_message] = Take(Api().PJRT_Client_BufferFromHostBuffer(&complex));
  EXPECT_EQ(type_code, PJRT_Error_Code_UNIMPLEMENTED);
  EXPECT_THAT(type_message, HasSubstr("element type 14 is not supported"));
}

// ----- Multi-process clients: node_id, num_nodes and the key-value callbacks.

// Values the store handed out and the plugin freed through value_deleter_callback.
std::atomic<int> values_freed{0};

// An in-memory key-value store served through PJRT_Client_Create_Args' callbacks, as chorus serves
// them from its rendezvous store: a get waits up to its timeout for the key, then fails through
// the plugin's callback_error.
class KeyValueStore {
 public:
  static PJRT_Error* Get(PJRT_KeyValueGetCallback_Args* args) {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    const std::string key(args->key, args->key_size);
    std::unique_lock lock(store->mutex_);
    if (!store->changed_.wait_for(lock, std::chrono::milliseconds(args->timeout_in_ms),
                                  [&] { return store->values_.count(key) != 0; })) {
      const std::string message =
          "test store: no key " + key + " after " + std::to_string(args->timeout_in_ms) + " ms";
      return args->callback_error(PJRT_Error_Code_DEADLINE_EXCEEDED, message.data(),
                                  message.size());
    }
    const std::string& value = store->values_[key];
    args->value = new char[value.size()];
    std::memcpy(args->value, value.data(), value.size());
    args->value_size = value.size();
    args->value_deleter_callback = [](char* value) {
      delete[] value;
      values_freed.fetch_add(1);
    };
    ++store->gets_served_;
    return nullptr;
  }
  static PJRT_Error* Put(PJRT_KeyValuePutCallback_Args* args) {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    {
      std::lock_guard lock(store->mutex_);
      store->values_[std::string(args->key, args->key_size)] =
          std::string(args->value, args->value_size);
    }
    store->changed_.notify_all();
    return nullptr;
  }
  void Set(const std::string& key, const std::string& value) {
    std::lock_guard lock(mutex_);
    values_[key] = value;
  }
  std::map<std::string, std::string> values() {
    std::lock_guard lock(mutex_);
    return values_;
  }
  int gets_served() {
    std::lock_guard lock(mutex_);
    return gets_served_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  int gets_served_ = 0;
};

PJRT_NamedValue Int64Option(const char* name, int64_t value) {
  PJRT_NamedValue option{};
  option.struct_size = sizeof(option);
  option.name = name;
  option.name_size = std::strlen(name);
  option.type = PJRT_NamedValue_kInt64;
  option.int64_value = value;
  option.value_size = 1;
  return option;
}

struct Created {
  PJRT_Client* client = nullptr;
  std::pair<int, std::string> error;
};

// A client of `options`, with the store's callbacks when `store` is given.
Created CreateClient(const std::vector<PJRT_NamedValue>& options, KeyValueStore* store) {
  auto create = Sized<PJRT_Client_Create_Args>();
  create.create_options = options.data();
  create.num_options = options.size();
  if (store != nullptr) {
    create.kv_get_callback = KeyValueStore::Get;
    create.kv_get_user_arg = store;
    create.kv_put_callback = KeyValueStore::Put;
    create.kv_put_user_arg = store;
  }
  Created created;
  created.error = Take(Api().PJRT_Client_Create(&create));
  created.client = create.client;
  return created;
}

// Node 0 and node 1 of a two-node client, of 2 devices each, created at once on two threads.
std::vector<PJRT_Client*> CreateTwoNodes(KeyValueStore& store) {
  std::vector<Created> created(2);
  std::vector<std::thread> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.emplace_back([&, node] {
      created[node] = CreateClient({Int64Option("device_count", 2), Int64Option("node_id", node),
                                    Int64Option("num_nodes", 2)},
                                   &store);
    });
  }
  for (std::thread& node : nodes) node.join();
  std::vector<PJRT_Client*> clients;
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(created[node].error.first, 0)
        << "node " << node << ": " << created[node].error.second;
    clients.push_back(created[node].client);
  }
  return clients;
}

void FreeEvent(PJRT_Event* event) {
  auto destroy = Sized<PJRT_Event_Destroy_Args>();
  destroy.event = event;
  EXPECT_EQ(Take(Api().PJRT_Event_Destroy(&destroy)).first, 0);
}

void FreeBuffer(PJRT_Buffer* buffer) {
  auto destroy = Sized<PJRT_Buffer_Destroy_Args>();
  destroy.buffer = buffer;
  EXPECT_EQ(Take(Api().PJRT_Buffer_Destroy(&destroy)).first, 0);
}

void DestroyClient(PJRT_Client* client) {
  auto destroy = Sized<PJRT_Client_Destroy_Args>();
  destroy.client = client;
  EXPECT_EQ(Take(Api().PJRT_Client_Destroy(&destroy)).first, 0);
}

std::vector<PJRT_Device*> AllDevices(PJRT_Client* client) {
  auto args = Sized<PJRT_Client_Devices_Args>();
  args.client = client;
  EXPECT_EQ(Take(Api().PJRT_Client_Devices(&args)).first, 0);
  return {args.devices, args.devices + args.num_devices};
}

std::vector<PJRT_Device*> AddressableDevices(PJRT_Client* client) {
  auto args = Sized<PJRT_Client_AddressableDevices_Args>();
  args.client = client;
  EXPECT_EQ(Take(Api().PJRT_Client_AddressableDevices(&args)).first, 0);
  return {args.addressable_devices, args.addressable_devices + args.num_addressable_devices};
}

// What a client says of one of its devices.
struct DeviceFacts {
  int id = -1;
  int process_index = -1;
  bool addressable = false;
  int local_hardware_id = -1;
  std::vector<int64_t> coords;
};

DeviceFacts Facts(PJRT_Device* device) {
  DeviceFacts facts;
  auto description = Sized<PJRT_Device_GetDescription_Args>();
  description.device = device;
  EXPECT_EQ(Take(Api().PJRT_Device_GetDescription(&description)).first, 0);
  auto id = Sized<PJRT_DeviceDescription_Id_Args>();
  id.device_description = description.device_description;
  EXPECT_EQ(Take(Api().PJRT_DeviceDescription_Id(&id)).first, 0);
  facts.id = id.id;
  auto process = Sized<PJRT_DeviceDescription_ProcessIndex_Args>();
  process.device_description = description.device_description;
  EXPECT_EQ(Take(Api().PJRT_DeviceDescription_ProcessIndex(&process)).first, 0);
  facts.process_index = process.process_index;
  auto addressable = Sized<PJRT_Device_IsAddressable_Args>();
  addressable.device = device;
  EXPECT_EQ(Take(Api().PJRT_Device_IsAddressable(&addressable)).first, 0);
  facts.addressable = addressable.is_addressable;
  auto hardware = Sized<PJRT_Device_LocalHardwareId_Args>();
  hardware.device = device;
  EXPECT_EQ(Take(Api().PJRT_Device_LocalHardwareId(&hardware)).first, 0);
  facts.local_hardware_id = hardware.local_hardware_id;
  auto attributes = Sized<PJRT_DeviceDescription_Attributes_Args>();
  attributes.device_description = description.device_description;
  EXPECT_EQ(Take(Api().PJRT_DeviceDescription_Attributes(&attributes)).first, 0);
  for (size_t a = 0; a < attributes.num_attributes; ++a) {
    const PJRT_NamedValue& attribute = attributes.attributes[a];
    if (std::string(attribute.name, attribute.name_size) == "coords") {
      facts.coords.assign(attribute.int64_array_value,
                          attribute.int64_array_value + attribute.value_size);
    }
  }
  return facts;
}

std::vector<int> Ids(const std::vector<PJRT_Device*>& devices) {
  std::vector<int> ids;
  for (PJRT_Device* device : devices) ids.push_back(Facts(device).id);
  return ids;
}

int ProcessIndex(PJRT_Client* client) {
  auto args = Sized<PJRT_Client_ProcessIndex_Args>();
  args.client = client;
  EXPECT_EQ(Take(Api().PJRT_Client_ProcessIndex(&args)).first, 0);
  return args.process_index;
}

TEST(ReferencePjrtNodes, TwoNodesInOneProcessSeeEveryNodesDevicesAndAddressTheirOwn) {
  KeyValueStore store;
  const int freed_before = values_freed.load();
  const std::vector<PJRT_Client*> clients = CreateTwoNodes(store);
  ASSERT_NE(clients[0], nullptr);
  ASSERT_NE(clients[1], nullptr);
  // Each node put its device count under its key, and read the other's (and freed the value).
  EXPECT_EQ(store.values(),
            (std::map<std::string, std::string>{{"reference_pjrt/devices/0", "2"},
                                                {"reference_pjrt/devices/1", "2"}}));
  EXPECT_EQ(store.gets_served(), 2);
  EXPECT_EQ(values_freed.load() - freed_before, 2);
  for (int node = 0; node < 2; ++node) {
    SCOPED_TRACE("node " + std::to_string(node));
    PJRT_Client* client = clients[node];
    EXPECT_EQ(ProcessIndex(client), node);
    const std::vector<PJRT_Device*> all = AllDevices(client);
    EXPECT_THAT(Ids(all), ElementsAre(0, 1, 2, 3));
    EXPECT_THAT(Ids(AddressableDevices(client)), node == 0 ? ElementsAre(0, 1) : ElementsAre(2, 3));
    for (size_t i = 0; i < all.size(); ++i) {
      const DeviceFacts facts = Facts(all[i]);
      const int owner = static_cast<int>(i) / 2;
      EXPECT_EQ(facts.process_index, owner) << "device " << i;
      EXPECT_EQ(facts.addressable, owner == node) << "device " << i;
      EXPECT_EQ(facts.local_hardware_id, static_cast<int>(i) % 2) << "device " << i;
      EXPECT_EQ(facts.coords, (std::vector<int64_t>{static_cast<int64_t>(i) % 2, owner, 0}))
          << "device " << i;
    }
  }
  for (PJRT_Client* client : clients) DestroyClient(client);
}

TEST(ReferencePjrtNodes, ANodeWhosePeerNeverComesFailsItsCreateNamingTheKey) {
  KeyValueStore store;
  const auto start = std::chrono::steady_clock::now();
  const Created created = CreateClient(
      {Int64Option("node_id", 0), Int64Option("num_nodes", 2), Int64Option("kv_timeout_ms", 100)},
      &store);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(created.client, nullptr);
  EXPECT_EQ(created.error.first, PJRT_Error_Code_DEADLINE_EXCEEDED);  // the callback's code
  EXPECT_THAT(created.error.second,
              HasSubstr("key-value get of 'reference_pjrt/devices/1' failed: test store: no key "
                        "reference_pjrt/devices/1 after 100 ms"));
  EXPECT_EQ(store.values(),
            (std::map<std::string, std::string>{{"reference_pjrt/devices/0", "4"}}));
}

TEST(ReferencePjrtNodes, APeersValueThatIsNotADeviceCountFailsTheCreateNamingTheKey) {
  KeyValueStore store;
  store.Set("reference_pjrt/devices/0", "two");
  const Created created =
      CreateClient({Int64Option("node_id", 1), Int64Option("num_nodes", 2)}, &store);
  EXPECT_EQ(created.client, nullptr);
  EXPECT_EQ(created.error.first, PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_THAT(created.error.second,
              HasSubstr("key-value get of 'reference_pjrt/devices/0' gave 'two', which is not a "
                        "device count (0..64)"));
}

TEST(ReferencePjrtNodes, MultiProcessOptionsAreChecked) {
  KeyValueStore store;
  const auto refusal = [&](const std::vector<PJRT_NamedValue>& options, KeyValueStore* with) {
    const Created created = CreateClient(options, with);
    EXPECT_EQ(created.client, nullptr);
    EXPECT_EQ(created.error.first, PJRT_Error_Code_INVALID_ARGUMENT);
    return created.error.second;
  };
  const std::string no_callbacks =
      refusal({Int64Option("node_id", 0), Int64Option("num_nodes", 2)}, nullptr);
  EXPECT_THAT(no_callbacks, HasSubstr("option num_nodes=2"));
  EXPECT_THAT(no_callbacks, HasSubstr("key-value callbacks"));
  EXPECT_THAT(no_callbacks, HasSubstr("needed for num_nodes > 1"));
  EXPECT_THAT(refusal({Int64Option("node_id", 2), Int64Option("num_nodes", 2)}, &store),
              HasSubstr("option node_id=2 is outside 0..1 (num_nodes=2)"));
  EXPECT_THAT(refusal({Int64Option("node_id", 1)}, &store),
              HasSubstr("option node_id=1 is outside 0..0 (num_nodes=1)"));
  EXPECT_THAT(refusal({Int64Option("num_nodes", 0)}, &store),
              HasSubstr("option num_nodes=0 is outside 1..64"));
  EXPECT_THAT(refusal({Int64Option("num_nodes", 2), Int64Option("kv_timeout_ms", 0)}, &store),
              HasSubstr("option kv_timeout_ms=0 is outside 1..2147483647"));
  PJRT_NamedValue text = Int64Option("node_id", 0);
  text.type = PJRT_NamedValue_kString;
  text.string_value = "0";
  EXPECT_THAT(refusal({text}, &store), HasSubstr("option node_id must be an int64"));
  EXPECT_THAT(refusal({Int64Option("nodes", 2)}, &store),
              HasSubstr("unknown client option 'nodes' (this plugin knows device_count, "
                        "visible_devices, node_id, num_nodes and kv_timeout_ms)"));
  EXPECT_TRUE(store.values().empty());  // nothing was put before the options were checked
}

// A one-replica program doubling a tensor<2xf32>, and compile options of one replica, on the
// device of id `device` when it is given (xla.CompileOptionsProto, hand-encoded).
const char kDoubling[] =
    "module @doubling attributes {mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 1 : i32} {\n"
    "  func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32>) {\n"
    "    %y = \"stablehlo.add\"(%x, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n"
    "    \"func.return\"(%y) : (tensor<2xf32>) -> ()\n"
    "  }\n"
    "}\n";

std::string OneReplicaOptions(int device = -1) {
  std::string build = "\x20\x01";  // num_replicas: 1
  if (device >= 0) {
    // device_assignment { replica_count: 1, computation_count: 1, computation_devices {
    // replica_device_ids: [device] } }
    const std::string assignment =
        std::string("\x08\x01\x10\x01\x1a\x02\x08") + static_cast<char>(device);
    build += "\x4a" + std::string(1, static_cast<char>(assignment.size())) + assignment;
  }
  return "\x1a" + std::string(1, static_cast<char>(build.size())) + build;
}

std::pair<PJRT_LoadedExecutable*, std::pair<int, std::string>> Compile(PJRT_Client* client,
                                                                       int device = -1) {
  const std::string options = OneReplicaOptions(device);
  PJRT_Program program{};
  program.struct_size = sizeof(program);
  program.code = const_cast<char*>(kDoubling);
  program.code_size = sizeof(kDoubling) - 1;
  program.format = "mlir";
  program.format_size = 4;
  auto compile = Sized<PJRT_Client_Compile_Args>();
  compile.client = client;
  compile.program = &program;
  compile.compile_options = options.data();
  compile.compile_options_size = options.size();
  auto error = Take(Api().PJRT_Client_Compile(&compile));
  return {compile.executable, error};
}

// Runs `executable` on `device` (nullptr: its compile-time device) with `buffer`; the output.
std::pair<PJRT_Buffer*, std::pair<int, std::string>> Execute(PJRT_LoadedExecutable* executable,
                                                             PJRT_Buffer* buffer,
                                                             PJRT_Device* device) {
  PJRT_Buffer* const arguments[1] = {buffer};
  PJRT_Buffer* const* argument_lists[1] = {arguments};
  PJRT_Buffer* outputs[1] = {nullptr};
  PJRT_Buffer** output_lists[1] = {outputs};
  auto execute = Sized<PJRT_LoadedExecutable_Execute_Args>();
  execute.executable = executable;
  execute.argument_lists = argument_lists;
  execute.num_devices = 1;
  execute.num_args = 1;
  execute.output_lists = output_lists;
  execute.execute_device = device;
  auto error = Take(Api().PJRT_LoadedExecutable_Execute(&execute));
  return {outputs[0], error};
}

void DestroyExecutable(PJRT_LoadedExecutable* executable) {
  auto destroy = Sized<PJRT_LoadedExecutable_Destroy_Args>();
  destroy.executable = executable;
  EXPECT_EQ(Take(Api().PJRT_LoadedExecutable_Destroy(&destroy)).first, 0);
}

TEST(ReferencePjrtNodes, NothingIsPutOrRunOnAnotherProcesssDevice) {
  KeyValueStore store;
  const std::vector<PJRT_Client*> clients = CreateTwoNodes(store);
  ASSERT_NE(clients[0], nullptr);
  ASSERT_NE(clients[1], nullptr);
  const std::vector<PJRT_Device*> devices = AllDevices(clients[0]);  // ids 0..3
  ASSERT_EQ(devices.size(), 4u);
  const float data[2] = {1.5f, -2};
  int64_t count = 2;
  const auto from_host = [&](PJRT_Client* client, PJRT_Device* device) {
    auto args = Sized<PJRT_Client_BufferFromHostBuffer_Args>();
    args.client = client;
    args.data = data;
    args.type = PJRT_Buffer_Type_F32;
    args.dims = &count;
    args.num_dims = 1;
    args.device = device;
    auto error = Take(Api().PJRT_Client_BufferFromHostBuffer(&args));
    if (args.done_with_host_buffer != nullptr) FreeEvent(args.done_with_host_buffer);
    return std::make_pair(args.buffer, error);
  };

  // A buffer: on node 0's device 2 (node 1's), and on a device handle of node 1's client.
  const auto [remote, remote_error] = from_host(clients[0], devices[2]);
  EXPECT_EQ(remote, nullptr);
  EXPECT_EQ(remote_error.first, PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_THAT(remote_error.second,
              HasSubstr("device 2 belongs to process 1; the reference plugin runs on this "
                        "process's devices only"));
  const auto [foreign, foreign_error] = from_host(clients[0], AddressableDevices(clients[1])[0]);
  EXPECT_EQ(foreign, nullptr);
  EXPECT_THAT(foreign_error.second, HasSubstr("another client's device"));

  // A copy to another process's device.
  const auto [local, local_error] = from_host(clients[0], devices[1]);
  ASSERT_EQ(local_error.first, 0) << local_error.second;
  auto copy = Sized<PJRT_Buffer_CopyToDevice_Args>();
  copy.buffer = local;
  copy.dst_device = devices[3];
  const auto [copy_code, copy_message] = Take(Api().PJRT_Buffer_CopyToDevice(&copy));
  EXPECT_EQ(copy_code, PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_THAT(copy_message, HasSubstr("device 3 belongs to process 1"));

  // A compile whose device assignment names another process's device, or no process's.
  const auto [assigned_remote, assigned_remote_error] = Compile(clients[0], 2);
  EXPECT_EQ(assigned_remote, nullptr);
  EXPECT_EQ(assigned_remote_error.first, PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_THAT(assigned_remote_error.second,
              HasSubstr("the device assignment names device 2, which belongs to process 1; the "
                        "reference plugin runs on this process's devices only"));
  const auto [assigned_none, assigned_none_error] = Compile(clients[0], 7);
  EXPECT_EQ(assigned_none, nullptr);
  EXPECT_THAT(assigned_none_error.second,
              HasSubstr("names device 7, which no process of the client has"));

  // An execute on another process's device.
  const auto [executable, compile_error] = Compile(clients[0]);
  ASSERT_EQ(compile_error.first, 0) << compile_error.second;
  const auto [output, execute_error] = Execute(executable, local, devices[2]);
  EXPECT_EQ(output, nullptr);
  EXPECT_EQ(execute_error.first, PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_THAT(execute_error.second, HasSubstr("execute_device: device 2 belongs to process 1"));
  DestroyExecutable(executable);
  FreeBuffer(local);
  for (PJRT_Client* client : clients) DestroyClient(client);
}

TEST(ReferencePjrtNodes, ASecondNodesProgramsRunOnItsOwnDevicesById) {
  KeyValueStore store;
  const std::vector<PJRT_Client*> clients = CreateTwoNodes(store);
  ASSERT_NE(clients[1], nullptr);
  const std::vector<PJRT_Device*> own = AddressableDevices(clients[1]);  // ids 2 and 3
  ASSERT_EQ(own.size(), 2u);
  const float data[2] = {1.5f, -2};
  int64_t count = 2;
  for (int assigned : {-1, 3}) {
    SCOPED_TRACE("assigned device " + std::to_string(assigned));
    // Without an assignment the program runs on node 1's first device, id 2 (not the client's
    // device of index 0, id 0, node 0's).
    PJRT_Device* device = assigned < 0 ? own[0] : own[1];
    auto args = Sized<PJRT_Client_BufferFromHostBuffer_Args>();
    args.client = clients[1];
    args.data = data;
    args.type = PJRT_Buffer_Type_F32;
    args.dims = &count;
    args.num_dims = 1;
    args.device = device;
    ASSERT_EQ(Take(Api().PJRT_Client_BufferFromHostBuffer(&args)).first, 0);
    FreeEvent(args.done_with_host_buffer);
    const auto [executable, compile_error] = Compile(clients[1], assigned);
    ASSERT_EQ(compile_error.first, 0) << compile_error.second;
    const auto [output, execute_error] = Execute(executable, args.buffer, nullptr);
    ASSERT_EQ(execute_error.first, 0) << execute_error.second;
    auto on = Sized<PJRT_Buffer_Device_Args>();
    on.buffer = output;
    EXPECT_EQ(Take(Api().PJRT_Buffer_Device(&on)).first, 0);
    EXPECT_EQ(on.device, device);
    float back[2] = {};
    auto to_host = Sized<PJRT_Buffer_ToHostBuffer_Args>();
    to_host.src = output;
    to_host.dst = back;
    to_host.dst_size = sizeof(back);
    ASSERT_EQ(Take(Api().PJRT_Buffer_ToHostBuffer(&to_host)).first, 0);
    auto await = Sized<PJRT_Event_Await_Args>();
    await.event = to_host.event;
    EXPECT_EQ(Take(Api().PJRT_Event_Await(&await)).first, 0);
    FreeEvent(to_host.event);
    EXPECT_EQ(back[0], 3.0f);
    EXPECT_EQ(back[1], -4.0f);
    FreeBuffer(output);
    FreeBuffer(args.buffer);
    DestroyExecutable(executable);
  }
  for (PJRT_Client* client : clients) DestroyClient(client);
}

TEST(ReferencePjrtNodes, OneNodeIsTodaysClient) {
  KeyValueStore store;  // given, and not used: one node exchanges nothing
  const Created created = CreateClient({Int64Option("num_nodes", 1)}, &store);
  ASSERT_EQ(created.error.first, 0) << created.error.second;
  EXPECT_EQ(ProcessIndex(created.client), 0);
  EXPECT_THAT(Ids(AllDevices(created.client)), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Ids(AddressableDevices(created.client)), ElementsAre(0, 1, 2, 3));
  const DeviceFacts facts = Facts(AllDevices(created.client)[3]);
  EXPECT_EQ(facts.process_index, 0);
  EXPECT_TRUE(facts.addressable);
  EXPECT_EQ(facts.coords, (std::vector<int64_t>{3, 0, 0}));
  EXPECT_TRUE(store.values().empty());
  DestroyClient(created.client);
}

}  // namespace
}  // namespace chorus::pjrt
