// The nccl plugin on a GPU (label gpu; every test skips, saying so, without one): the cuda
// enumerator's reduce and divide kernels for every dtype and op against the core's host kernels,
// NCCL cross-device all-reduce over every local GPU, and the NCCL collective with one rank per
// communicator (NCCL allows one rank per GPU, so with one GPU the communicator has size 1).
#include <chorus/communicator.h>
#include <chorus/cross_device_ops.h>
#include <chorus/device.h>
#include <chorus/kv_store.h>
#include <chorus/registry.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace chorus {
namespace {

int GpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

#define SKIP_WITHOUT_GPU() \
  if (GpuCount() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped"

Registry& NcclRegistry() {
  static Registry registry(LoaderOptions{{}, std::string(CHORUS_NCCL_PLUGIN_PATH)});
  return registry;
}

TEST(NcclGpu, KernelsMatchTheHostForEveryDtypeAndOp) {
  SKIP_WITHOUT_GPU();
  auto gpu = DeviceEnumerator::Create(NcclRegistry().FindPlugin("nccl"));
  auto cpu = DeviceEnumerator::Create(NcclRegistry().FindPlugin("core"), {{"count", "1"}});
  constexpr size_t kCount = 100003;
  for (int d = 0; d < CHORUS_DTYPE_COUNT; ++d) {
    const auto dtype = static_cast<chorus_dtype>(d);
    const size_t bytes = kCount * chorus_dtype_size(dtype);
    // Inputs: arbitrary bit patterns made valid by a host round trip through a reduce (x max x).
    std::vector<unsigned char> a(bytes), b(bytes);
    for (size_t i = 0; i < bytes; ++i) {
      a[i] = static_cast<unsigned char>((i * 37 + 11) % 251 % 64);
      b[i] = static_cast<unsigned char>((i * 53 + 7) % 241 % 64);
    }
    for (int o = CHORUS_REDUCE_SUM; o <= CHORUS_REDUCE_MAX; ++o) {
      const auto op = static_cast<chorus_reduce_op>(o);
      SCOPED_TRACE(std::string("dtype ") + std::to_string(d) + " op " + std::to_string(o));
      // Host reference through the core's kernel.
      std::vector<unsigned char> expected(bytes);
      chorus_reduce_kernel_args host{};
      host.struct_size = sizeof(host);
      host.device = 0;
      host.dst = expected.data();
      host.a = a.data();
      host.b = b.data();
      host.count = kCount;
      host.dtype = dtype;
      host.op = op;
      ASSERT_EQ(cpu->api().reduce(cpu->context(), &host), CHORUS_OK);
      // Device.
      void* da = gpu->Allocate(0, bytes);
      void* db = gpu->Allocate(0, bytes);
      gpu->Copy(0, da, CHORUS_HOST_DEVICE, a.data(), bytes);
      gpu->Copy(0, db, CHORUS_HOST_DEVICE, b.data(), bytes);
      chorus_reduce_kernel_args args = host;
      args.dst = da;
      args.a = da;
      args.b = db;
      ASSERT_EQ(gpu->api().reduce(gpu->context(), &args), CHORUS_OK) << gpu->library().LastError();
      std::vector<unsigned char> actual(bytes);
      gpu->Copy(CHORUS_HOST_DEVICE, actual.data(), 0, da, bytes);
      gpu->Deallocate(0, da);
      gpu->Deallocate(0, db);
      // f16/bf16 compute in float on both sides and round to nearest even: equal bit for bit,
      // except NaN payloads, which these inputs do not produce for SUM/MIN/MAX.
      EXPECT_EQ(actual, expected);
    }
  }
}

TEST(NcclGpu, CrossDeviceAllReduceOverEveryLocalGpu) {
  SKIP_WITHOUT_GPU();
  auto gpu = DeviceEnumerator::Create(NcclRegistry().FindPlugin("nccl"));
  std::vector<Device> devices;
  for (uint32_t i = 0; i < gpu->count(); ++i) devices.push_back({gpu, i});
  auto ops = CrossDeviceOps::Create(NcclRegistry(), "nccl", devices);
  constexpr size_t kCount = 1 << 20;
  ReduceSpec spec;
  spec.dtype = CHORUS_F32;
  spec.count = kCount;
  std::vector<void*> buffers;
  for (uint32_t i = 0; i < gpu->count(); ++i) {
    std::vector<float> host(kCount, static_cast<float>(i + 1));
    void* p = gpu->Allocate(i, kCount * sizeof(float));
    gpu->Copy(i, p, CHORUS_HOST_DEVICE, host.data(), kCount * sizeof(float));
    buffers.push_back(p);
    spec.inputs.push_back({i, p});
    spec.outputs.push_back({i, p});
  }
  ops->Reduce(CHORUS_REDUCE_SUM, spec);
  const float n = static_cast<float>(gpu->count());
  for (uint32_t i = 0; i < gpu->count(); ++i) {
    std::vector<float> host(kCount);
    gpu->Copy(CHORUS_HOST_DEVICE, host.data(), i, buffers[i], kCount * sizeof(float));
    EXPECT_EQ(host.front(), n * (n + 1) / 2);
    EXPECT_EQ(host.back(), n * (n + 1) / 2);
    gpu->Deallocate(i, buffers[i]);
  }
}

TEST(NcclGpu, CollectiveAllReduceWithOneRank) {
  SKIP_WITHOUT_GPU();
  auto plugin = NcclRegistry().FindPlugin("nccl");
  auto gpu = DeviceEnumerator::Create(plugin);
  auto store = MakeInProcessStore();
  CKvStore c_store(store);
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = 0;
  args.size = 1;
  args.store = c_store.get();
  args.timeout_ms = 60000;
  args.devices_api = &gpu->api();
  args.devices = gpu->context();
  args.device = 0;
  chorus_communicator* comm = nullptr;
  ASSERT_EQ(plugin->collective()->create(&args, &comm), CHORUS_OK) << plugin->LastError();
  std::vector<float> host(1001, 2.5f);
  void* p = gpu->Allocate(0, host.size() * sizeof(float));
  gpu->Copy(0, p, CHORUS_HOST_DEVICE, host.data(), host.size() * sizeof(float));
  chorus_all_reduce_args ar{};
  ar.struct_size = sizeof(ar);
  ar.send = p;
  ar.recv = p;
  ar.count = host.size();
  ar.dtype = CHORUS_F32;
  ar.op = CHORUS_REDUCE_SUM;
  chorus_request* request = nullptr;
  EXPECT_EQ(plugin->collective()->all_reduce(comm, &ar, &request), CHORUS_OK)
      << plugin->LastError();
  EXPECT_EQ(request, nullptr);
  std::vector<float> out(host.size());
  gpu->Copy(CHORUS_HOST_DEVICE, out.data(), 0, p, out.size() * sizeof(float));
  EXPECT_EQ(out, host);  // one rank: the sum is the input
  gpu->Deallocate(0, p);
  plugin->collective()->destroy(comm);
}

}  // namespace
}  // namespace chorus
