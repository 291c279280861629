// Loading a PJRT plugin and driving its client, over chorus's reference PJRT plugin and its fault
// variants: which library the variables choose, the options, every fault a named error, devices
// with coordinates, buffers round-tripped through the device for every dtype chorus has, and the
// StableHLO programs chorus writes, compiled and run.
#include "pjrt_client.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chorus/error.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "scoped_variable.h"
#include "stablehlo_programs.h"

namespace chorus::tpu {
namespace {

using namespace std::chrono_literals;
using test::ScopedVariable;
using ::testing::HasSubstr;

std::string FaultPath(int fault) {
  return std::string(PJRT_FAULT_DIR) + "/libchorus-pjrt-fault-" + std::to_string(fault) + ".so";
}

Error Thrown(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no chorus::Error was thrown";
  return Error(CHORUS_OK, "");
}

std::shared_ptr<PjrtLibrary> Reference() {
  return PjrtLibrary::Open({PJRT_REFERENCE_PATH, "CHORUS_PJRT_PLUGIN"});
}

TEST(ChoosePjrtPlugin, TheVariablesInTheirOrder) {
  ScopedVariable chorus("CHORUS_PJRT_PLUGIN", "/opt/vendor/pjrt.so");
  ScopedVariable tpu("TPU_LIBRARY_PATH", "/opt/libtpu/libtpu.so");
  PjrtPluginChoice choice = ChoosePjrtPlugin("/ref.so");
  EXPECT_EQ(choice.path, "/opt/vendor/pjrt.so");
  EXPECT_EQ(choice.source, "CHORUS_PJRT_PLUGIN");
  {
    ScopedVariable reference("CHORUS_PJRT_PLUGIN", "reference");
    choice = ChoosePjrtPlugin("/ref.so");
    EXPECT_EQ(choice.path, "/ref.so");
  }
  {
    ScopedVariable unset("CHORUS_PJRT_PLUGIN", nullptr);
    choice = ChoosePjrtPlugin("/ref.so");
    EXPECT_EQ(choice.path, "/opt/libtpu/libtpu.so");
    EXPECT_EQ(choice.source, "TPU_LIBRARY_PATH");
  }
}

TEST(ChoosePjrtPlugin, NoneNamesTheThreeWays) {
  ScopedVariable chorus("CHORUS_PJRT_PLUGIN", nullptr);
  ScopedVariable tpu("TPU_LIBRARY_PATH", "");
  if (void* libtpu = ::dlopen("libtpu.so", RTLD_LAZY | RTLD_LOCAL)) {
    ::dlclose(libtpu);
    GTEST_SKIP() << "this machine has libtpu.so on the loader's path, so it is always found";
  }
  const Error error = Thrown([] { ChoosePjrtPlugin("/ref.so"); });
  EXPECT_EQ(error.status(), CHORUS_NOT_FOUND);
  EXPECT_THAT(error.what(), HasSubstr("CHORUS_PJRT_PLUGIN"));
  EXPECT_THAT(error.what(), HasSubstr("TPU_LIBRARY_PATH"));
  EXPECT_THAT(error.what(), HasSubstr("libtpu.so"));
}

TEST(ChoosePjrtPlugin, ReferenceIsFoundBesideTheBuild) {
  EXPECT_EQ(ReferencePjrtPluginPath(), std::string(PJRT_REFERENCE_PATH));
}

TEST(ParsePjrtOptions, EveryValueType) {
  const auto options = ParsePjrtOptions(
      "device_count=2,visible_devices=[0;3],fraction=0.5,"
      "preallocate=false,name=abc");
  ASSERT_EQ(options.size(), 5u);
  EXPECT_EQ(options[0].type, pjrt::PJRT_NamedValue_kInt64);
  EXPECT_EQ(options[0].int64_value, 2);
  EXPECT_EQ(options[1].type, pjrt::PJRT_NamedValue_kInt64List);
  EXPECT_EQ(options[1].int64_list, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(options[2].type, pjrt::PJRT_NamedValue_kFloat);
  EXPECT_FLOAT_EQ(options[2].float_value, 0.5f);
  EXPECT_EQ(options[3].type, pjrt::PJRT_NamedValue_kBool);
  EXPECT_FALSE(options[3].bool_value);
  EXPECT_EQ(options[4].type, pjrt::PJRT_NamedValue_kString);
  EXPECT_EQ(options[4].string_value, "abc");
  EXPECT_TRUE(ParsePjrtOptions("").empty());
  EXPECT_EQ(ParsePjrtOptions("visible_devices=[1,2]")[0].int64_list, (std::vector<int64_t>{1, 2}));
  const auto omitted = ParsePjrtOptions("node_id=");
  ASSERT_EQ(omitted.size(), 1u);
  EXPECT_EQ(omitted[0].name, "node_id");
  EXPECT_TRUE(omitted[0].omit) << "an empty value passes no option of that name";
}

TEST(ParsePjrtOptions, MalformedEntriesAreNamed) {
  const Error no_value = Thrown([] { ParsePjrtOptions("device_count"); });
  EXPECT_EQ(no_value.status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(no_value.what(), HasSubstr("'device_count' is not name=value"));
  const Error bad_list = Thrown([] { ParsePjrtOptions("visible_devices=[0;x]"); });
  EXPECT_THAT(bad_list.what(), HasSubstr("'x' is not an integer"));
}

TEST(PjrtLibrary, OpensTheReferencePlugin) {
  const auto library = Reference();
  EXPECT_EQ(library->major_version(), 0);
  EXPECT_GE(library->minor_version(), pjrt::kPjrtMinor);
}

TEST(PjrtLibrary, EveryFaultIsANamedError) {
  struct Case {
    std::string path;
    chorus_status status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"/nonexistent/libpjrt.so", CHORUS_NOT_FOUND, "no such file"},
      {FaultPath(1), CHORUS_INVALID_ARGUMENT, "exports no GetPjrtApi"},
      {FaultPath(2), CHORUS_INTERNAL, "GetPjrtApi returned no table"},
      {FaultPath(3), CHORUS_UNSUPPORTED, "implements PJRT C API 1."},
      {FaultPath(4), CHORUS_UNSUPPORTED, "use a newer plugin"},
  };
  for (const Case& c : cases) {
    const Error error = Thrown([&] { PjrtLibrary::Open({c.path, "CHORUS_PJRT_PLUGIN"}); });
    EXPECT_EQ(error.status(), c.status) << c.path << ": " << error.what();
    EXPECT_THAT(error.what(), HasSubstr(c.says)) << c.path;
    EXPECT_THAT(error.what(), HasSubstr(c.path));
    EXPECT_THAT(error.what(), HasSubstr("CHORUS_PJRT_PLUGIN"));
  }
  // A file that is not a shared library at all.
  const Error not_elf = Thrown([] { PjrtLibrary::Open({PJRT_FAULT_DIR, "TPU_LIBRARY_PATH"}); });
  EXPECT_EQ(not_elf.status(), CHORUS_NOT_FOUND);
  EXPECT_THAT(not_elf.what(), HasSubstr("cannot be loaded"));
}

TEST(PjrtClient, AClientThatFailsToCreateSaysWhy) {
  const auto library = PjrtLibrary::Open({FaultPath(5), "CHORUS_PJRT_PLUGIN"});
  const Error error = Thrown([&] { PjrtClient client(library, {}); });
  EXPECT_EQ(error.status(), CHORUS_INTERNAL);
  EXPECT_THAT(error.what(), HasSubstr("PJRT_Client_Create"));
  EXPECT_THAT(error.what(), HasSubstr("no devices could be opened"));
}

// A job's store as the core hands it to a plugin (chorus_kv_store), in this process's memory:
// set and get (waiting up to the time-out) are what the PJRT client's callbacks use.
class MemoryJobStore {
 public:
  MemoryJobStore() {
    table_.struct_size = sizeof(table_);
    table_.ctx = this;
    table_.set = [](void* ctx, const char* key, const void* value, size_t size) {
      auto* self = static_cast<MemoryJobStore*>(ctx);
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->values_[key].assign(static_cast<const char*>(value),
                                static_cast<const char*>(value) + size);
      self->changed_.notify_all();
      return CHORUS_OK;
    };
    table_.get = [](void* ctx, const char* key, int64_t timeout_ms, void* value, size_t capacity,
                    size_t* size) {
      auto* self = static_cast<MemoryJobStore*>(ctx);
      std::unique_lock<std::mutex> lock(self->mutex_);
      if (!self->changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                   [&] { return self->values_.count(key) > 0; })) {
        return CHORUS_TIMEOUT;
      }
      const std::string& stored = self->values_[key];
      std::memcpy(value, stored.data(), std::min(capacity, stored.size()));
      *size = stored.size();
      return CHORUS_OK;
    };
  }
  const chorus_kv_store* table() const { return &table_; }
  bool Has(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.count(key) > 0;
  }

 private:
  chorus_kv_store table_{};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

// Two processes' clients of one job (threads here): each is told its process and the
// processes, their key-value exchange goes through the job's store, and each sees the job's
// devices with its own addressable.
TEST(PjrtClient, AClientOfAJobMeetsTheOtherProcessesThroughTheJobsStore) {
  MemoryJobStore store;
  std::unique_ptr<PjrtClient> clients[2];
  std::thread other([&] {
    const PjrtJob job{store.table(), 1, 2, std::chrono::milliseconds(20000)};
    clients[1] =
        std::make_unique<PjrtClient>(Reference(), ParsePjrtOptions("device_count=2"), &job);
  });
  const PjrtJob job{store.table(), 0, 2, std::chrono::milliseconds(20000)};
  clients[0] = std::make_unique<PjrtClient>(Reference(), ParsePjrtOptions("device_count=2"), &job);
  other.join();
  ASSERT_TRUE(clients[1] != nullptr);
  for (int p = 0; p < 2; ++p) {
    EXPECT_TRUE(clients[p]->multi_process());
    EXPECT_EQ(clients[p]->process_index(), p);
    EXPECT_EQ(clients[p]->global_device_count(), 4u);
    ASSERT_EQ(clients[p]->addressable_devices().size(), 2u);
    EXPECT_EQ(clients[p]->addressable_devices()[0].id, 2 * p);
    EXPECT_EQ(clients[p]->addressable_devices()[1].process_index, p);
  }
  EXPECT_TRUE(store.Has("reference_pjrt/devices/0"));
  EXPECT_TRUE(store.Has("reference_pjrt/devices/1"));
}

// A process whose peers never come: the plugin asks to wait a minute, chorus caps the wait at
// the job's time-out and the create fails naming the key and the store.
TEST(PjrtClient, AClientWhosePeersNeverComeFailsWithinTheJobsTimeOut) {
  MemoryJobStore store;
  const PjrtJob job{store.table(), 0, 2, std::chrono::milliseconds(300)};
  const auto start = std::chrono::steady_clock::now();
  const Error error = Thrown([&] { PjrtClient client(Reference(), {}, &job); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(error.status(), CHORUS_TIMEOUT) << error.what();
  EXPECT_THAT(error.what(), HasSubstr("chorus's job store: get of 'reference_pjrt/devices/1' "
                                      "(waited up to 300 ms) failed with TIMEOUT"));
  EXPECT_THAT(error.what(), HasSubstr("options: node_id, num_nodes"));
}

// "node_id=" and "num_nodes=" leave chorus's process options out: the plugin then makes a client
// of this process alone, which touches no store.
TEST(PjrtClient, EmptyOptionValuesLeaveTheJobsProcessOptionsOut) {
  MemoryJobStore store;
  const PjrtJob job{store.table(), 1, 2, std::chrono::milliseconds(300)};
  PjrtClient client(Reference(), ParsePjrtOptions("device_count=2,node_id=,num_nodes="), &job);
  EXPECT_EQ(client.process_index(), 0);
  EXPECT_EQ(client.global_device_count(), 2u);
  EXPECT_FALSE(store.Has("reference_pjrt/devices/1"));
}

TEST(PjrtClient, AnUnknownOptionIsRefusedByName) {
  const Error error =
      Thrown([] { PjrtClient client(Reference(), ParsePjrtOptions("memory_fraction=0.5")); });
  EXPECT_EQ(error.status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(error.what(), HasSubstr("unknown client option 'memory_fraction'"));
  EXPECT_THAT(error.what(), HasSubstr("options: memory_fraction"));
}

TEST(PjrtClient, DevicesWithCoordinatesAndOptions) {
  PjrtClient client(Reference(), ParsePjrtOptions("device_count=6,visible_devices=[1;4]"));
  EXPECT_EQ(client.platform_name(), "reference");
  EXPECT_THAT(client.platform_version(), HasSubstr("chorus reference PJRT plugin"));
  EXPECT_EQ(client.process_index(), 0);
  const auto& devices = client.addressable_devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, 1);
  EXPECT_EQ(devices[1].id, 4);
  EXPECT_EQ(devices[1].coords, (std::vector<int64_t>{4, 0, 0}));
  EXPECT_EQ(devices[1].local_hardware_id, 4);
  EXPECT_THAT(devices[0].kind, HasSubstr("reference"));
  PjrtClient defaults(Reference(), {});
  EXPECT_EQ(defaults.addressable_devices().size(), 4u);
}

// Each dtype chorus has, as PJRT's element type and size.
struct DtypeCase {
  pjrt::PJRT_Buffer_Type type;
  size_t size;
};

TEST(PjrtClient, BuffersRoundTripEveryDtypeAndSize) {
  PjrtClient client(Reference(), {});
  const std::vector<DtypeCase> dtypes = {
      {pjrt::PJRT_Buffer_Type_F32, 4}, {pjrt::PJRT_Buffer_Type_F64, 8},
      {pjrt::PJRT_Buffer_Type_F16, 2}, {pjrt::PJRT_Buffer_Type_BF16, 2},
      {pjrt::PJRT_Buffer_Type_S32, 4}, {pjrt::PJRT_Buffer_Type_S64, 8},
      {pjrt::PJRT_Buffer_Type_U8, 1},  {pjrt::PJRT_Buffer_Type_S8, 1}};
  for (const DtypeCase& dtype : dtypes) {
    for (int64_t count : {0, 1, 7, 65537}) {
      std::vector<unsigned char> bytes(static_cast<size_t>(count) * dtype.size);
      std::iota(bytes.begin(), bytes.end(), static_cast<unsigned char>(count + dtype.type));
      const auto& device = client.addressable_devices()[count % 4];
      PjrtBuffer buffer = client.FromHost(device, dtype.type, bytes.data(), count, 10s);
      std::vector<unsigned char> back(bytes.size(), 0xee);
      client.ToHost(buffer, back.data(), back.size(), 10s);
      EXPECT_EQ(back, bytes) << "type " << dtype.type << ", " << count << " elements";
    }
  }
}

TEST(PjrtClient, AHostBufferOfTheWrongSizeIsRefused) {
  PjrtClient client(Reference(), {});
  const float data[3] = {1, 2, 3};
  PjrtBuffer buffer =
      client.FromHost(client.addressable_devices()[0], pjrt::PJRT_Buffer_Type_F32, data, 3, 10s);
  float small[2];
  const Error error = Thrown([&] { client.ToHost(buffer, small, sizeof(small), 10s); });
  EXPECT_EQ(error.status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(error.what(), HasSubstr("12 bytes to a host buffer of 8 bytes"));
}

TEST(PjrtClient, ADeviceErrorDuringACopyIsTheCallersError) {
  PjrtClient client(PjrtLibrary::Open({FaultPath(6), "CHORUS_PJRT_PLUGIN"}), {});
  const float data[3] = {1, 2, 3};
  PjrtBuffer buffer =
      client.FromHost(client.addressable_devices()[0], pjrt::PJRT_Buffer_Type_F32, data, 3, 10s);
  float back[3];
  const Error error = Thrown([&] { client.ToHost(buffer, back, sizeof(back), 10s); });
  EXPECT_EQ(error.status(), CHORUS_INTERNAL);
  EXPECT_THAT(error.what(), HasSubstr("copying 12 bytes to the host"));
  EXPECT_THAT(error.what(), HasSubstr("device error while copying to the host"));
}

TEST(PjrtClient, ACopyThatNeverCompletesInTimeIsATimeOutAndItsLateWriteIsHarmless) {
  std::vector<float> back(3, -1.0f);
  {
    PjrtClient client(PjrtLibrary::Open({FaultPath(7), "CHORUS_PJRT_PLUGIN"}), {});
    const float data[3] = {1, 2, 3};
    PjrtBuffer buffer =
        client.FromHost(client.addressable_devices()[0], pjrt::PJRT_Buffer_Type_F32, data, 3, 10s);
    const auto start = std::chrono::steady_clock::now();
    const Error error = Thrown([&] { client.ToHost(buffer, back.data(), 12, 200ms); });
    EXPECT_EQ(error.status(), CHORUS_TIMEOUT);
    EXPECT_THAT(error.what(), HasSubstr("copying 12 bytes to the host"));
    EXPECT_THAT(error.what(), HasSubstr("did not complete it within 200 ms"));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
  }  // destroying the client waits for the plugin's late copy, 2 s after it was asked for
  // The late copy went to chorus's staging memory: the caller's, which it may have freed after
  // the time-out, is untouched.
  EXPECT_EQ(back, (std::vector<float>{-1.0f, -1.0f, -1.0f}));
}

// The exact text of the smallest all-reduce, so that a change to what real PJRT plugins are given
// shows in review: StableHLO's generic form, the bytes reinterpreted as f32 without moving them.
TEST(StablehloPrograms, AnAllReduceProgramIsStableHloText) {
  AllReducePart part{CHORUS_F32, CHORUS_REDUCE_SUM, 3, {1, 0}, true};
  EXPECT_EQ(AllReduceProgram({part}, 2),
            "module @chorus_all_reduce attributes {mhlo.num_replicas = 2 : i32, "
            "mhlo.num_partitions = 1 : i32} {\n"
            "  func.func public @main(%arg0: tensor<12xui8> {tf.aliasing_output = 0 : i32}) -> "
            "(tensor<12xui8>) {\n"
            "    %packed0 = \"stablehlo.reshape\"(%arg0) : (tensor<12xui8>) -> tensor<3x4xui8>\n"
            "    %in0 = \"stablehlo.bitcast_convert\"(%packed0) : (tensor<3x4xui8>) -> "
            "tensor<3xf32>\n"
            "    %sum0 = \"stablehlo.all_reduce\"(%in0) ({\n"
            "    ^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):\n"
            "      %combined0 = \"stablehlo.add\"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> "
            "tensor<f32>\n"
            "      \"stablehlo.return\"(%combined0) : (tensor<f32>) -> ()\n"
            "    }) {replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> "
            "tensor<3xf32>\n"
            "    %unpacked0 = \"stablehlo.bitcast_convert\"(%sum0) : (tensor<3xf32>) -> "
            "tensor<3x4xui8>\n"
            "    %out0 = \"stablehlo.reshape\"(%unpacked0) : (tensor<3x4xui8>) -> "
            "tensor<12xui8>\n"
            "    \"func.return\"(%out0) : (tensor<12xui8>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(StablehloPrograms, CompileOptionsCarryTheReplicas) {
  // executable_build_options (field 3) { device_ordinal: -1, num_replicas: 4, num_partitions: 1 }
  const std::string expected =
      std::string("\x1a\x0f\x08") + std::string(9, '\xff') + "\x01" + "\x20\x04\x28\x01";
  EXPECT_EQ(CompileOptionsProto(4), expected);
  // With a device assignment: executable_build_options' field 9, xla.DeviceAssignmentProto
  // { replica_count: 2, computation_count: 1, computation_devices { replica_device_ids: [3, 1]
  // (packed) } }.
  const std::string assigned = std::string("\x1a\x1b\x08") + std::string(9, '\xff') + "\x01" +
                               "\x20\x02\x28\x01" + "\x4a\x0a\x08\x02\x10\x01\x1a\x04" +
                               "\x0a\x02\x03\x01";
  EXPECT_EQ(CompileOptionsProto(2, false, {3, 1}), assigned);
}

// Arguments one per device, results one per device: the reference plugin sums in the replica
// group's order and donates an argument the program aliases.
TEST(PjrtClient, CompilesAndRunsAnAllReduceAcrossDevices) {
  PjrtClient client(Reference(), {});
  const std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  AllReducePart part{CHORUS_F32, CHORUS_REDUCE_SUM, 3, {0, 1}, false};
  std::unique_ptr<PjrtExecutable> executable = client.Compile(AllReduceProgram({part}, 2), 2);
  ASSERT_EQ(executable->num_outputs(), 1u);
  PjrtBuffer x = client.FromHost(client.addressable_devices()[0], pjrt::PJRT_Buffer_Type_U8,
                                 a.data(), 12, 10s);
  PjrtBuffer y = client.FromHost(client.addressable_devices()[1], pjrt::PJRT_Buffer_Type_U8,
                                 b.data(), 12, 10s);
  std::vector<std::vector<PjrtBuffer>> results =
      client.Execute(*executable, {{x.handle()}, {y.handle()}}, 10s);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& device : results) {
    std::vector<float> sum(3);
    client.ToHost(device.at(0), sum.data(), 12, 10s);
    EXPECT_EQ(sum, (std::vector<float>{11, 22, 33}));
  }
  std::vector<float> still(3);
  client.ToHost(x, still.data(), 12, 10s);
  EXPECT_EQ(still, a) << "an argument the program does not alias is kept";

  part.donate = true;
  executable = client.Compile(AllReduceProgram({part}, 2), 2);
  results = client.Execute(*executable, {{x.handle()}, {y.handle()}}, 10s);
  EXPECT_THAT(Thrown([&] { client.ToHost(x, still.data(), 12, 10s); }).what(), HasSubstr("deleted"))
      << "a donated argument is the result's now";
}

TEST(PjrtClient, AProgramOutsideTheReferenceSubsetIsRefusedNamingTheLine) {
  PjrtClient client(Reference(), {});
  const std::string program =
      "module @m attributes {mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 1 : i32} {\n"
      "  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {\n"
      "    %0 = \"stablehlo.sine\"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n"
      "    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n  }\n}\n";
  const Error error = Thrown([&] { client.Compile(program, 1); });
  EXPECT_EQ(error.status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_THAT(error.what(), HasSubstr("line 3"));
  EXPECT_THAT(error.what(), HasSubstr("stablehlo.sine is not in the subset"));
  const Error mismatch = Thrown([&] { client.Compile(BroadcastProgram(4, {0, 1}, 2), 3); });
  EXPECT_THAT(mismatch.what(), HasSubstr("the compile options say 3 replicas"));
}

}  // namespace
}  // namespace chorus::tpu
