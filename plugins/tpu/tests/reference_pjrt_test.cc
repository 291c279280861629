// The reference PJRT plugin keeps the ABI's rules as real plugins do, called directly through its
// table: argument structs smaller than its own refused, handles used after destroy an error (not
// a crash), immutable buffers that can be deleted, events completed on its worker thread, and a
// clear UNIMPLEMENTED for what it does not do.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "pjrt_abi.h"

namespace chorus::pjrt {
namespace {

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

}  // namespace
}  // namespace chorus::pjrt
