// Bad arguments on the plugin's raw C tables: each call must fail with CHORUS_INVALID_ARGUMENT
// (UNSUPPORTED where noted), set a last_error() message, leak nothing (ASan checks, under
// CHORUS_SANITIZE) and crash nothing; the cross-device ops must still work afterwards. One test
// per case, so that a crash names its case.
#include <chorus/base/error.h>

#include <functional>

#include "ops_driver.h"
#include "reference.h"
#include "suite.h"

namespace chorus::conformance::internal {
namespace {

constexpr chorus_dtype kUnknownDtype = static_cast<chorus_dtype>(99);
constexpr chorus_reduce_op kUnknownOp = static_cast<chorus_reduce_op>(99);
constexpr uint32_t kMissingDevice = 1000;  // not among the 8 cpu devices
constexpr uint32_t kMissingIndices[] = {0, kMissingDevice};
constexpr size_t kCount = 16;
constexpr uint32_t kReplicas = 4;

const std::vector<chorus_status> kInvalid = {CHORUS_INVALID_ARGUMENT};

// Valid arguments for every cross-device operation over cpu devices 0..3 of 8; a case copies
// one and breaks it.
class Setup {
 public:
  Setup(const Suite& suite, const chorus_cross_device_ops_api& api) : suite_(suite), api_(api) {}

  // The status of the ops' create; *message holds its last_error() when it failed.
  chorus_status Init(std::string* message) {
    cpu_ = suite_.CpuDevices(8);
    const chorus_status status =
        OpsDriver::Create(suite_, api_, cpu_, {0, 1, 2, 3}, &ops_, message);
    if (status != CHORUS_OK) return status;
    for (uint32_t d = 0; d < kReplicas; ++d) {
      HostTensor host(CHORUS_F32, kCount);
      host.Fill(Pattern::kSmall, d);
      in_.emplace_back(Device{cpu_, d}, host.bytes());
      in_.back().CopyFromHost(host.data(), host.bytes());
      out_.emplace_back(Device{cpu_, d}, host.bytes());
      gathered_.emplace_back(Device{cpu_, d}, host.bytes() * kReplicas);
      inputs.push_back(in_.back().buffer());
      outputs.push_back(out_.back().buffer());
      gather_outputs.push_back(gathered_.back().buffer());
    }
    reduce.struct_size = sizeof(reduce);
    reduce.dtype = CHORUS_F32;
    reduce.op = CHORUS_REDUCE_SUM;
    reduce.count = kCount;
    reduce.inputs = inputs.data();
    reduce.num_inputs = inputs.size();
    reduce.outputs = outputs.data();
    reduce.num_outputs = outputs.size();
    second_reduce = reduce;
    reduces = {&reduce, &second_reduce};
    batch.struct_size = sizeof(batch);
    batch.reduces = reduces.data();
    batch.num_reduces = reduces.size();
    broadcast.struct_size = sizeof(broadcast);
    broadcast.dtype = CHORUS_F32;
    broadcast.count = kCount;
    broadcast.source = inputs[0];
    broadcast.outputs = outputs.data();
    broadcast.num_outputs = outputs.size();
    all_gather.struct_size = sizeof(all_gather);
    all_gather.dtype = CHORUS_F32;
    all_gather.inputs = inputs.data();
    all_gather.counts = counts.data();
    all_gather.num_inputs = inputs.size();
    all_gather.outputs = gather_outputs.data();
    all_gather.num_outputs = gather_outputs.size();
    return CHORUS_OK;
  }

  // The raw calls; the status is the call's, or its request's when it returned one.
  chorus_status Reduce(const chorus_reduce_args* args, bool null_ops = false) {
    chorus_request* request = nullptr;
    return Finish(api().reduce(null_ops ? nullptr : ops_->handle(), args, &request), request);
  }
  chorus_status BatchReduce(const chorus_batch_reduce_args* args) {
    chorus_request* request = nullptr;
    return Finish(api().batch_reduce(ops_->handle(), args, &request), request);
  }
  chorus_status Broadcast(const chorus_broadcast_args* args) {
    chorus_request* request = nullptr;
    return Finish(api().broadcast(ops_->handle(), args, &request), request);
  }
  chorus_status AllGather(const chorus_all_gather_args* args) {
    chorus_request* request = nullptr;
    return Finish(api().all_gather(ops_->handle(), args, &request), request);
  }

  // After a rejected call, a valid all-reduce on fresh buffers still gives the right sums.
  void ExpectStillWorks() {
    std::vector<DeviceBuffer> fresh_in, fresh_out;
    ReduceCall call{CHORUS_F32, kCount, {}, {}};
    std::vector<HostTensor> hosts;
    for (uint32_t d = 0; d < kReplicas; ++d) {
      HostTensor& host = hosts.emplace_back(CHORUS_F32, kCount);
      host.Fill(Pattern::kSmall, d);
      fresh_in.emplace_back(Device{cpu_, d}, host.bytes());
      fresh_in.back().CopyFromHost(host.data(), host.bytes());
      fresh_out.emplace_back(Device{cpu_, d}, host.bytes());
      call.inputs.push_back(fresh_in.back().buffer());
      call.outputs.push_back(fresh_out.back().buffer());
    }
    const HostTensor expected = ExpectedReduce(CHORUS_REDUCE_SUM, hosts);
    const auto result = ops_->Reduce(CHORUS_REDUCE_SUM, call);
    ASSERT_TRUE(result) << "a valid f32 SUM reduce of " << kCount
                        << " elements after the rejected call failed: " << result.message()
                        << "; a rejected call must leave the ops object usable";
    for (const auto& buffer : fresh_out) {
      HostTensor host(CHORUS_F32, kCount);
      buffer.CopyToHost(host.data(), host.bytes());
      EXPECT_TRUE(SameValues(host, expected))
          << "a valid f32 SUM reduce of " << kCount << " elements after the rejected call gave "
          << "wrong sums; a rejected call must change no state of the ops object";
    }
  }

  std::vector<chorus_buffer> inputs, outputs, gather_outputs;
  std::vector<size_t> counts = std::vector<size_t>(kReplicas, kCount);
  chorus_reduce_args reduce{};
  chorus_reduce_args second_reduce{};
  std::vector<const chorus_reduce_args*> reduces;
  chorus_batch_reduce_args batch{};
  chorus_broadcast_args broadcast{};
  chorus_all_gather_args all_gather{};

 private:
  const chorus_cross_device_ops_api& api() const { return ops_->api(); }
  chorus_status Finish(chorus_status status, chorus_request* request) {
    return FinishRequest(suite_.plugin(), status, request, suite_.timeout_ms());
  }

  const Suite& suite_;
  const chorus_cross_device_ops_api& api_;
  std::shared_ptr<DeviceEnumerator> cpu_;
  std::unique_ptr<OpsDriver> ops_;
  std::vector<DeviceBuffer> in_, out_, gathered_;
};

using OpsCall = std::function<chorus_status(Setup&)>;

// BadArguments.<name> (and /<ops> when the plugin has several cross-device ops) for every
// cross-device ops of the plugin: `test(api)`.
void AddForEachOps(const SuitePtr& suite, const std::string& name,
                   const std::function<void(const chorus_cross_device_ops_api& api)>& test) {
  const auto& all = suite->plugin().cross_device_ops_list();
  for (const chorus_cross_device_ops_api* api : all) {
    AddTest("BadArguments", name + (all.size() > 1 ? "/" + std::string(api->name) : ""),
            [api, test] { test(*api); });
  }
}

// BadArguments.<name>: `call` makes one broken call; its status must be one of `allowed`.
void AddOpsCase(const SuitePtr& suite, const std::string& name, OpsCall call,
                std::vector<chorus_status> allowed = kInvalid) {
  AddForEachOps(suite, name, [suite, name, call, allowed](const chorus_cross_device_ops_api& api) {
    Setup setup(*suite, api);
    std::string message;
    const chorus_status status = setup.Init(&message);
    if (IsNotHere(status)) {
      FailOrSkipNotHere(*suite, status, DeclaresAnyOnCpuDevices(api),
                        "create over 4 of the core's cpu devices", message);
      return;
    }
    ASSERT_EQ(status, CHORUS_OK) << "create over 4 cpu devices: " << StatusName(status) << ": "
                                 << message
                                 << "; create must succeed over host-memory cpu devices to check "
                                    "its bad arguments";
    ExpectStatus(*suite, call(setup), allowed, name);
    setup.ExpectStillWorks();
  });
}

// A call with the valid arguments of one operation, after `edit(setup, args)`.
template <typename Args, typename Edit>
OpsCall With(Args Setup::*valid, chorus_status (Setup::*method)(const Args*), Edit edit) {
  return [valid, method, edit](Setup& s) {
    Args args = s.*valid;
    edit(s, args);
    return (s.*method)(&args);
  };
}
template <typename Edit>
OpsCall ReduceWith(Edit edit) {
  return [edit](Setup& s) {
    chorus_reduce_args args = s.reduce;
    edit(s, args);
    return s.Reduce(&args);
  };
}

void RegisterCreateCases(const SuitePtr& suite) {
  using Edit = std::function<void(chorus_cross_device_ops_create_args&)>;
  auto add = [&suite](const std::string& name, Edit edit, bool null_args = false) {
    AddForEachOps(suite, name, [suite, name, edit, null_args](const auto& api) {
      const auto cpu = suite->CpuDevices(8);
      const std::vector<uint32_t> indices = {0, 1, 2, 3};
      auto args = CreateArgs(*cpu, indices, {});
      edit(args);
      chorus_cross_device_ops* out = nullptr;
      ExpectStatus(*suite, api.create(null_args ? nullptr : &args, &out), kInvalid, name);
      if (out != nullptr) {
        ADD_FAILURE() << name
                      << ": create set *out to an object although it should fail; "
                         "leave *out untouched (or NULL) when returning an error";
        api.destroy(out);
      }
    });
  };
  add(
      "CreateNullArgs", [](auto&) {}, true);
  add("CreateStructSizeZero", [](auto& a) { a.struct_size = 0; });
  add("CreateNoDevices", [](auto& a) { a.num_devices = 0; });
  add("CreateNullDeviceIndices", [](auto& a) { a.device_indices = nullptr; });
  add("CreateDeviceOutOfRange", [](auto& a) {
    a.device_indices = kMissingIndices;
    a.num_devices = std::size(kMissingIndices);
  });
  add("CreateNullEnumerator", [](auto& a) {
    a.devices_api = nullptr;
    a.devices = nullptr;
  });
}

void RegisterReduceCases(const SuitePtr& suite) {
  using A = chorus_reduce_args;
  AddOpsCase(suite, "ReduceNullOps", [](Setup& s) { return s.Reduce(&s.reduce, true); });
  AddOpsCase(suite, "ReduceNullArgs", [](Setup& s) { return s.Reduce(nullptr); });
  AddOpsCase(suite, "ReduceStructSizeZero", ReduceWith([](Setup&, A& a) { a.struct_size = 0; }));
  AddOpsCase(suite, "ReduceUnknownDtype",
             ReduceWith([](Setup&, A& a) { a.dtype = kUnknownDtype; }));
  AddOpsCase(suite, "ReduceUnknownOp", ReduceWith([](Setup&, A& a) { a.op = kUnknownOp; }));
  // plugin.h: the core never passes MEAN; a plugin may answer UNSUPPORTED (or implement it).
  AddOpsCase(suite, "ReduceMean", ReduceWith([](Setup&, A& a) { a.op = CHORUS_REDUCE_MEAN; }),
             {CHORUS_UNSUPPORTED, CHORUS_INVALID_ARGUMENT, CHORUS_OK});
  AddOpsCase(suite, "ReduceNoInputs", ReduceWith([](Setup&, A& a) { a.num_inputs = 0; }));
  AddOpsCase(suite, "ReduceNoOutputs", ReduceWith([](Setup&, A& a) { a.num_outputs = 0; }));
  AddOpsCase(suite, "ReduceNullInputArray", ReduceWith([](Setup&, A& a) { a.inputs = nullptr; }));
  AddOpsCase(suite, "ReduceNullOutputArray", ReduceWith([](Setup&, A& a) { a.outputs = nullptr; }));
  AddOpsCase(suite, "ReduceInputDeviceOutOfRange",
             ReduceWith([](Setup& s, A&) { s.inputs[2].device = kMissingDevice; }));
  AddOpsCase(suite, "ReduceOutputDeviceOutOfRange",
             ReduceWith([](Setup& s, A&) { s.outputs[1].device = kMissingDevice; }));
  AddOpsCase(suite, "ReduceNullInputData",
             ReduceWith([](Setup& s, A&) { s.inputs[1].data = nullptr; }));
  AddOpsCase(suite, "ReduceNullOutputData",
             ReduceWith([](Setup& s, A&) { s.outputs[3].data = nullptr; }));
}

void RegisterBatchReduceCases(const SuitePtr& suite) {
  using B = chorus_batch_reduce_args;
  const auto batch = [](auto edit) { return With(&Setup::batch, &Setup::BatchReduce, edit); };
  AddOpsCase(suite, "BatchReduceNullArgs", [](Setup& s) { return s.BatchReduce(nullptr); });
  AddOpsCase(suite, "BatchReduceStructSizeZero", batch([](Setup&, B& b) { b.struct_size = 0; }));
  AddOpsCase(suite, "BatchReduceNullReduces", batch([](Setup&, B& b) { b.reduces = nullptr; }));
  AddOpsCase(suite, "BatchReduceNullMember", batch([](Setup& s, B&) { s.reduces[1] = nullptr; }));
  AddOpsCase(suite, "BatchReduceBadMember",
             batch([](Setup& s, B&) { s.second_reduce.dtype = kUnknownDtype; }));
}

void RegisterBroadcastCases(const SuitePtr& suite) {
  using C = chorus_broadcast_args;
  const auto cast = [](auto edit) { return With(&Setup::broadcast, &Setup::Broadcast, edit); };
  AddOpsCase(suite, "BroadcastNullArgs", [](Setup& s) { return s.Broadcast(nullptr); });
  AddOpsCase(suite, "BroadcastStructSizeZero", cast([](Setup&, C& c) { c.struct_size = 0; }));
  AddOpsCase(suite, "BroadcastUnknownDtype", cast([](Setup&, C& c) { c.dtype = kUnknownDtype; }));
  AddOpsCase(suite, "BroadcastNoOutputs", cast([](Setup&, C& c) { c.num_outputs = 0; }));
  AddOpsCase(suite, "BroadcastNullOutputArray", cast([](Setup&, C& c) { c.outputs = nullptr; }));
  AddOpsCase(suite, "BroadcastSourceDeviceOutOfRange",
             cast([](Setup&, C& c) { c.source.device = kMissingDevice; }));
  AddOpsCase(suite, "BroadcastOutputDeviceOutOfRange",
             cast([](Setup& s, C&) { s.outputs[2].device = kMissingDevice; }));
  AddOpsCase(suite, "BroadcastNullSourceData", cast([](Setup&, C& c) { c.source.data = nullptr; }));
  AddOpsCase(suite, "BroadcastNullOutputData",
             cast([](Setup& s, C&) { s.outputs[0].data = nullptr; }));
}

void RegisterAllGatherCases(const SuitePtr& suite) {
  using G = chorus_all_gather_args;
  const auto gather = [](auto edit) { return With(&Setup::all_gather, &Setup::AllGather, edit); };
  AddOpsCase(suite, "AllGatherNullArgs", [](Setup& s) { return s.AllGather(nullptr); });
  AddOpsCase(suite, "AllGatherStructSizeZero", gather([](Setup&, G& g) { g.struct_size = 0; }));
  AddOpsCase(suite, "AllGatherUnknownDtype", gather([](Setup&, G& g) { g.dtype = kUnknownDtype; }));
  AddOpsCase(suite, "AllGatherNoInputs", gather([](Setup&, G& g) { g.num_inputs = 0; }));
  AddOpsCase(suite, "AllGatherNoOutputs", gather([](Setup&, G& g) { g.num_outputs = 0; }));
  AddOpsCase(suite, "AllGatherNullCounts", gather([](Setup&, G& g) { g.counts = nullptr; }));
  AddOpsCase(suite, "AllGatherNullInputArray", gather([](Setup&, G& g) { g.inputs = nullptr; }));
  AddOpsCase(suite, "AllGatherNullOutputArray", gather([](Setup&, G& g) { g.outputs = nullptr; }));
  AddOpsCase(suite, "AllGatherInputDeviceOutOfRange",
             gather([](Setup& s, G&) { s.inputs[3].device = kMissingDevice; }));
  AddOpsCase(suite, "AllGatherOutputDeviceOutOfRange",
             gather([](Setup& s, G&) { s.gather_outputs[1].device = kMissingDevice; }));
  AddOpsCase(suite, "AllGatherNullInputData",
             gather([](Setup& s, G&) { s.inputs[2].data = nullptr; }));
  AddOpsCase(suite, "AllGatherNullOutputData",
             gather([](Setup& s, G&) { s.gather_outputs[0].data = nullptr; }));
}

// ---- The plugin's own device enumerator ------------------------------------------------------

// BadArguments.Enumerator<name>: `call(devices)` makes one broken call on a fresh context.
void AddEnumeratorCase(const SuitePtr& suite, const std::string& name,
                       std::function<chorus_status(const DeviceEnumerator&)> call,
                       std::vector<chorus_status> allowed = kInvalid, bool needs_device = false) {
  for (size_t e = 0; e < suite->plugin().device_enumerators().size(); ++e) {
    AddTest("BadArguments", suite->EnumeratorTestName("Enumerator" + name, e),
            [suite, e, name, call, allowed, needs_device] {
              auto devices = suite->PluginDevices(e);
              if (!devices) return;
              if (needs_device && devices->count() == 0) {
                GTEST_SKIP() << "the plugin's enumerator has no devices on this machine; this "
                                "case needs one (run the kit where it has a device)";
              }
              ExpectStatus(*suite, call(*devices), allowed, name);
            });
  }
}

// kCount f32 on device 0 of the plugin's enumerator, for the kernel cases; freed on scope exit.
class Scratch {
 public:
  explicit Scratch(const DeviceEnumerator& d) : d_(d) {
    EXPECT_EQ(d_.api().allocate(d_.context(), 0, kCount * sizeof(float), &data_), CHORUS_OK)
        << "allocate " << kCount * sizeof(float)
        << " bytes on device 0 (scratch for the kernel case) failed; allocate must succeed for a "
           "small size on a listed device";
  }
  ~Scratch() {
    if (data_ != nullptr) d_.api().deallocate(d_.context(), 0, data_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* data() const { return data_; }

 private:
  const DeviceEnumerator& d_;
  void* data_ = nullptr;
};

using D = const DeviceEnumerator&;

// A reduce kernel call on device 0 of valid arguments after `edit`.
template <typename Edit>
std::function<chorus_status(D)> KernelWith(Edit edit) {
  return [edit](D d) {
    Scratch memory(d);
    chorus_reduce_kernel_args args{};
    args.struct_size = sizeof(args);
    args.device = 0;
    args.dst = memory.data();
    args.a = memory.data();
    args.b = memory.data();
    args.count = kCount;
    args.dtype = CHORUS_F32;
    args.op = CHORUS_REDUCE_SUM;
    edit(d, args);
    return d.api().reduce(d.context(), &args);
  };
}

// A divide kernel call on device 0 of valid arguments after `edit`.
template <typename Edit>
std::function<chorus_status(D)> DivideWith(Edit edit) {
  return [edit](D d) {
    Scratch memory(d);
    chorus_divide_args args{};
    args.struct_size = sizeof(args);
    args.device = 0;
    args.data = memory.data();
    args.count = kCount;
    args.dtype = CHORUS_F32;
    args.divisor = 2;
    edit(d, args);
    return d.api().divide(d.context(), &args);
  };
}

// A host-to-host copy of 8 bytes after `edit` (no device needed).
template <typename Edit>
std::function<chorus_status(D)> CopyWith(Edit edit) {
  return [edit](D d) {
    char src[8] = {}, dst[8];
    chorus_copy_args args{};
    args.struct_size = sizeof(args);
    args.dst_device = CHORUS_HOST_DEVICE;
    args.dst = dst;
    args.src_device = CHORUS_HOST_DEVICE;
    args.src = src;
    args.bytes = sizeof(src);
    edit(d, args);
    return d.api().copy(d.context(), &args);
  };
}

void RegisterEnumeratorCases(const SuitePtr& suite) {
  using K = chorus_reduce_kernel_args;
  using V = chorus_divide_args;
  using C = chorus_copy_args;
  const std::vector<chorus_status> invalid_or_unsupported = {CHORUS_INVALID_ARGUMENT,
                                                             CHORUS_UNSUPPORTED};
  const bool needs_device = true;
  AddEnumeratorCase(suite, "CreateNullArgs", [](D d) {
    chorus_device_context* out = nullptr;
    const chorus_status status = d.api().create(nullptr, &out);
    if (out != nullptr) d.api().destroy(out);
    return status;
  });
  AddEnumeratorCase(suite, "DeviceInfoNullInfo",
                    [](D d) { return d.api().device_info(d.context(), 0, nullptr); });
  AddEnumeratorCase(suite, "AllocateDeviceOutOfRange",
                    [](D d) {
                      const uint32_t device = d.count() + kMissingDevice;
                      void* out = nullptr;
                      const chorus_status status = d.api().allocate(d.context(), device, 64, &out);
                      if (status == CHORUS_OK) d.api().deallocate(d.context(), device, out);
                      return status;
                    },
                    {CHORUS_INVALID_ARGUMENT, CHORUS_NOT_FOUND});
  AddEnumeratorCase(suite, "CopyNullArgs", [](D d) { return d.api().copy(d.context(), nullptr); });
  AddEnumeratorCase(suite, "CopyStructSizeZero", CopyWith([](D, C& c) { c.struct_size = 0; }));
  AddEnumeratorCase(suite, "CopyDeviceOutOfRange",
                    CopyWith([](D d, C& c) { c.dst_device = d.count() + kMissingDevice; }));
  AddEnumeratorCase(suite, "CopyNullData", CopyWith([](D, C& c) { c.dst = nullptr; }));
  AddEnumeratorCase(suite, "ReduceNullArgs",
                    [](D d) { return d.api().reduce(d.context(), nullptr); });
  AddEnumeratorCase(suite, "ReduceStructSizeZero", KernelWith([](D, K& k) { k.struct_size = 0; }),
                    kInvalid, needs_device);
  AddEnumeratorCase(suite, "ReduceUnknownDtype",
                    KernelWith([](D, K& k) { k.dtype = kUnknownDtype; }), kInvalid, needs_device);
  AddEnumeratorCase(suite, "ReduceUnknownOp", KernelWith([](D, K& k) { k.op = kUnknownOp; }),
                    kInvalid, needs_device);
  // plugin.h: kernels never see MEAN.
  AddEnumeratorCase(suite, "ReduceMean", KernelWith([](D, K& k) { k.op = CHORUS_REDUCE_MEAN; }),
                    invalid_or_unsupported, needs_device);
  AddEnumeratorCase(suite, "ReduceNullData", KernelWith([](D, K& k) { k.dst = nullptr; }), kInvalid,
                    needs_device);
  AddEnumeratorCase(suite, "ReduceDeviceOutOfRange", [](D d) {
    float a[kCount] = {}, b[kCount] = {}, dst[kCount];
    chorus_reduce_kernel_args args{};
    args.struct_size = sizeof(args);
    args.device = d.count() + kMissingDevice;
    args.dst = dst;
    args.a = a;
    args.b = b;
    args.count = kCount;
    args.dtype = CHORUS_F32;
    args.op = CHORUS_REDUCE_SUM;
    return d.api().reduce(d.context(), &args);
  });
  AddEnumeratorCase(suite, "DivideNullArgs",
                    [](D d) { return d.api().divide(d.context(), nullptr); });
  AddEnumeratorCase(suite, "DivideZeroDivisor", DivideWith([](D, V& v) { v.divisor = 0; }),
                    kInvalid, needs_device);
  AddEnumeratorCase(suite, "DivideUnknownDtype",
                    DivideWith([](D, V& v) { v.dtype = kUnknownDtype; }), kInvalid, needs_device);
  AddEnumeratorCase(suite, "DivideNullData", DivideWith([](D, V& v) { v.data = nullptr; }),
                    kInvalid, needs_device);
  AddEnumeratorCase(suite, "SynchronizeDeviceOutOfRange", [](D d) {
    return d.api().synchronize(d.context(), d.count() + kMissingDevice, nullptr);
  });
}

}  // namespace

void RegisterBadArgumentTests(const SuitePtr& suite) {
  if (suite->plugin().cross_device_ops() != nullptr) {
    RegisterCreateCases(suite);
    RegisterReduceCases(suite);
    RegisterBatchReduceCases(suite);
    RegisterBroadcastCases(suite);
    RegisterAllGatherCases(suite);
  }
  if (suite->plugin().device_enumerator() != nullptr) RegisterEnumeratorCases(suite);
}

}  // namespace chorus::conformance::internal
