// The nccl plugin on a GPU (label gpu; every test skips, saying so, without one): the cuda
// enumerator's reduce and divide kernels for every dtype and op against the core's host kernels,
// NCCL cross-device all-reduce over every local GPU (through the core, through a request, and on
// the caller's stream), MirroredStrategy on the GPUs as a trainer gets it by default, and the
// NCCL collective with one rank per communicator (NCCL allows one rank per GPU, so with one GPU
// the communicator has size 1).
#include <chorus/collective/communicator.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/conformance/rank_threads.h>
#include <chorus/distribute/strategies.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>
#include <chorus/training/optimizer.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu_count_for_tests.h"
#include "replicated_step_check.h"

namespace chorus {
namespace {

using test::GpuCount;

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
    // The divide kernel (MEAN's second half), including divisors with no signed 64-bit form.
    for (uint64_t divisor : {uint64_t{1}, uint64_t{3}, uint64_t{7}, uint64_t{1} << 63}) {
      SCOPED_TRACE(std::string("dtype ") + std::to_string(d) + " divide by " +
                   std::to_string(divisor));
      std::vector<unsigned char> expected = a;
      chorus_divide_args host{};
      host.struct_size = sizeof(host);
      host.data = expected.data();
      host.count = kCount;
      host.dtype = dtype;
      host.divisor = divisor;
      ASSERT_EQ(cpu->api().divide(cpu->context(), &host), CHORUS_OK);
      void* da = gpu->Allocate(0, bytes);
      gpu->Copy(0, da, CHORUS_HOST_DEVICE, a.data(), bytes);
      chorus_divide_args args = host;
      args.data = da;
      ASSERT_EQ(gpu->api().divide(gpu->context(), &args), CHORUS_OK) << gpu->library().LastError();
      std::vector<unsigned char> actual(bytes);
      gpu->Copy(CHORUS_HOST_DEVICE, actual.data(), 0, da, bytes);
      gpu->Deallocate(0, da);
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

// The plugin's cross-device ops over every local GPU, driven through plugin.h directly.
class RawNcclOps {
 public:
  RawNcclOps()
      : plugin_(NcclRegistry().FindPlugin("nccl")), gpu_(DeviceEnumerator::Create(plugin_)) {
    for (uint32_t i = 0; i < gpu_->count(); ++i) indices_.push_back(i);
    chorus_cross_device_ops_create_args args{};
    args.struct_size = sizeof(args);
    args.devices_api = &gpu_->api();
    args.devices = gpu_->context();
    args.device_indices = indices_.data();
    args.num_devices = indices_.size();
    EXPECT_EQ(api().create(&args, &ops_), CHORUS_OK) << plugin_->LastError();
  }
  ~RawNcclOps() {
    if (ops_ != nullptr) api().destroy(ops_);
  }
  const chorus_cross_device_ops_api& api() const { return *plugin_->cross_device_ops(); }
  const chorus_plugin& table() const { return plugin_->table(); }
  const PluginLibrary& plugin() const { return *plugin_; }
  chorus_cross_device_ops* ops() const { return ops_; }
  DeviceEnumerator& gpu() const { return *gpu_; }

 private:
  std::shared_ptr<PluginLibrary> plugin_;
  std::shared_ptr<DeviceEnumerator> gpu_;
  std::vector<uint32_t> indices_;
  chorus_cross_device_ops* ops_ = nullptr;
};

// In-place all-reduce arguments over one buffer of `count` floats per GPU.
chorus_reduce_args AllReduceArgs(const std::vector<chorus_buffer>& buffers, size_t count) {
  chorus_reduce_args args{};
  args.struct_size = sizeof(args);
  args.dtype = CHORUS_F32;
  args.op = CHORUS_REDUCE_SUM;
  args.count = count;
  args.inputs = buffers.data();
  args.num_inputs = buffers.size();
  args.outputs = buffers.data();
  args.num_outputs = buffers.size();
  return args;
}

TEST(NcclGpu, CrossDeviceOpsWithoutAStreamCompleteThroughARequest) {
  SKIP_WITHOUT_GPU();
  RawNcclOps raw;
  ASSERT_NE(raw.ops(), nullptr);
  const uint32_t n = raw.gpu().count();
  constexpr size_t kCount = (1 << 22) + 3;  // 16 MiB and odd, so that the wait is not instant
  std::vector<chorus_buffer> buffers;
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<float> host(kCount, static_cast<float>(i + 1));
    void* p = raw.gpu().Allocate(i, kCount * sizeof(float));
    raw.gpu().Copy(i, p, CHORUS_HOST_DEVICE, host.data(), kCount * sizeof(float));
    buffers.push_back({i, p});
  }
  const chorus_reduce_args args = AllReduceArgs(buffers, kCount);
  chorus_request* request = nullptr;
  ASSERT_EQ(raw.api().reduce(raw.ops(), &args, &request), CHORUS_OK) << raw.plugin().LastError();
  ASSERT_NE(request, nullptr) << "a NULL stream hands out a request backed by events";
  int done = 0;
  ASSERT_EQ(raw.table().request_test(request, &done), CHORUS_OK) << raw.plugin().LastError();
  ASSERT_EQ(raw.table().request_wait(request, 60000), CHORUS_OK) << raw.plugin().LastError();
  ASSERT_EQ(raw.table().request_test(request, &done), CHORUS_OK);
  EXPECT_EQ(done, 1);
  raw.table().request_free(request);
  const float expected = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<float> host(kCount);
    raw.gpu().Copy(CHORUS_HOST_DEVICE, host.data(), i, buffers[i].data, kCount * sizeof(float));
    EXPECT_EQ(host.front(), expected);
    EXPECT_EQ(host[kCount / 2], expected);
    EXPECT_EQ(host.back(), expected);
    raw.gpu().Deallocate(i, buffers[i].data);
  }
}

// The inputs are written, reduced and read back only through the caller's stream (of GPU 0, also
// for the other GPUs' buffers): if the operation did not wait for the stream's earlier copies, or
// the stream for the operation, the results would be the zeros written first or the unreduced
// inputs.
TEST(NcclGpu, CrossDeviceOpsOnTheCallersStreamAreOrderedByIt) {
  SKIP_WITHOUT_GPU();
  RawNcclOps raw;
  ASSERT_NE(raw.ops(), nullptr);
  const uint32_t n = raw.gpu().count();
  constexpr size_t kCount = 1 << 24;  // 64 MiB per GPU
  constexpr size_t kBytes = kCount * sizeof(float);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // Copies (not memsets: a kernel of GPU 0 may not reach another GPU's memory without peer
  // access) are what a stream of one device may do to any device's memory.
  float* zeros = nullptr;
  ASSERT_EQ(cudaMallocHost(&zeros, kBytes), cudaSuccess);
  std::fill(zeros, zeros + kCount, 0.0f);
  std::vector<chorus_buffer> buffers;
  std::vector<float*> pinned;
  for (uint32_t i = 0; i < n; ++i) {
    float* host = nullptr;
    ASSERT_EQ(cudaMallocHost(&host, kBytes), cudaSuccess);
    std::fill(host, host + kCount, static_cast<float>(i + 1));
    pinned.push_back(host);
    void* p = raw.gpu().Allocate(i, kBytes);
    ASSERT_EQ(cudaMemcpyAsync(p, zeros, kBytes, cudaMemcpyDefault, stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(p, host, kBytes, cudaMemcpyDefault, stream), cudaSuccess);
    buffers.push_back({i, p});
  }
  chorus_reduce_args args = AllReduceArgs(buffers, kCount);
  args.stream = reinterpret_cast<chorus_stream*>(stream);
  chorus_request* request = nullptr;
  ASSERT_EQ(raw.api().reduce(raw.ops(), &args, &request), CHORUS_OK) << raw.plugin().LastError();
  EXPECT_EQ(request, nullptr) << "with a stream the call completes when enqueued";
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(cudaMemcpyAsync(pinned[i], buffers[i].data, kBytes, cudaMemcpyDefault, stream),
              cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const float expected = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(pinned[i][0], expected);
    EXPECT_EQ(pinned[i][kCount - 1], expected);
    cudaFreeHost(pinned[i]);
    raw.gpu().Deallocate(i, buffers[i].data);
  }
  cudaFreeHost(zeros);
  cudaStreamDestroy(stream);
}

// The plugin's entry points set devices as they go; the caller's current device is the same
// after them, so its own launches do not land on another GPU.
TEST(NcclGpu, EntryPointsLeaveTheCallersCurrentDevice) {
  SKIP_WITHOUT_GPU();
  if (GpuCount() < 2) GTEST_SKIP() << "needs two GPUs (with one there is no other device)";
  RawNcclOps raw;
  ASSERT_NE(raw.ops(), nullptr);
  // GPU 0: the entry points visit every GPU in order and would end on the last one.
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the caller's context on GPU 0 exists
  std::vector<chorus_buffer> buffers;
  for (uint32_t i = 0; i < raw.gpu().count(); ++i) {
    buffers.push_back({i, raw.gpu().Allocate(i, 1001 * sizeof(float))});
  }
  const chorus_reduce_args args = AllReduceArgs(buffers, 1001);
  chorus_request* request = nullptr;
  ASSERT_EQ(raw.api().reduce(raw.ops(), &args, &request), CHORUS_OK) << raw.plugin().LastError();
  ASSERT_EQ(raw.table().request_wait(request, 60000), CHORUS_OK) << raw.plugin().LastError();
  raw.table().request_free(request);
  for (const chorus_buffer& b : buffers) raw.gpu().Deallocate(b.device, b.data);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
}

TEST(NcclGpu, OneGpuTwiceIsRefusedWithAMessage) {
  SKIP_WITHOUT_GPU();
  auto plugin = NcclRegistry().FindPlugin("nccl");
  auto gpu = DeviceEnumerator::Create(plugin);
  const uint32_t indices[] = {0, 0};
  chorus_cross_device_ops_create_args args{};
  args.struct_size = sizeof(args);
  args.devices_api = &gpu->api();
  args.devices = gpu->context();
  args.device_indices = indices;
  args.num_devices = 2;
  chorus_cross_device_ops* ops = nullptr;
  EXPECT_EQ(plugin->cross_device_ops()->create(&args, &ops), CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(ops, nullptr);
  EXPECT_NE(plugin->LastError().find("device 0 is given twice"), std::string::npos)
      << plugin->LastError();
}

// MirroredStrategy with no arguments on a GPU machine: one replica per CUDA device and the nccl
// cross-device ops (tf.distribute's default rule); replicas all-reduce in replica context and one
// SGD step updates every copy of a mirrored variable alike.
TEST(NcclGpu, MirroredStrategyOnTheGpusPicksNcclAndTrains) {
  SKIP_WITHOUT_GPU();
  MirroredStrategy strategy;
  ASSERT_EQ(strategy.num_replicas_in_sync(), GpuCount());
  EXPECT_EQ(strategy.cross_device_ops().name(), "nccl");
  test::CheckAllReduceAndSgdStep(strategy, "cuda");
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
  // Out of place into zeros, so that a call that returned without running would show.
  const size_t bytes = 1001 * sizeof(float);
  std::vector<float> host(1001, 2.5f);
  const std::vector<float> zeros(1001, 0.0f);
  void* p = gpu->Allocate(0, bytes);
  void* q = gpu->Allocate(0, bytes);
  gpu->Copy(0, p, CHORUS_HOST_DEVICE, host.data(), bytes);
  gpu->Copy(0, q, CHORUS_HOST_DEVICE, zeros.data(), bytes);
  chorus_all_reduce_args ar{};
  ar.struct_size = sizeof(ar);
  ar.send = p;
  ar.recv = q;
  ar.count = host.size();
  ar.dtype = CHORUS_F32;
  ar.op = CHORUS_REDUCE_SUM;
  chorus_request* request = nullptr;
  EXPECT_EQ(plugin->collective()->all_reduce(comm, &ar, &request), CHORUS_OK)
      << plugin->LastError();
  EXPECT_EQ(request, nullptr);
  std::vector<float> out(host.size());
  gpu->Copy(CHORUS_HOST_DEVICE, out.data(), 0, q, bytes);
  EXPECT_EQ(out, host);  // one rank: the sum is the input
  gpu->Deallocate(0, p);
  gpu->Deallocate(0, q);
  plugin->collective()->destroy(comm);
}

// Two ranks in two threads (the conformance kit's harness), one GPU each, over one in-process
// store, created and destroyed at once: rank 0 without a stream
// (the communicator's own, waited on), rank 1 on its own stream (the call returns once enqueued,
// which on a non-blocking communicator may come after NCCL's connection set-up).
TEST(NcclGpu, CollectiveAllReduceAcrossTwoGpusInTwoThreads) {
  SKIP_WITHOUT_GPU();
  if (GpuCount() < 2) GTEST_SKIP() << "needs two GPUs (NCCL allows one rank per GPU)";
  auto plugin = NcclRegistry().FindPlugin("nccl");
  auto gpu = DeviceEnumerator::Create(plugin);
  constexpr size_t kCount = (1 << 20) + 7;
  constexpr size_t kBytes = kCount * sizeof(float);
  conformance::CommunicatorSettings settings(120000);
  settings.devices = gpu;  // rank r on GPU r
  conformance::CommunicatorGroup group(plugin, *plugin->collective(), 2, settings);
  ASSERT_EQ(group.CreateError(), "");
  std::vector<std::vector<float>> results(2);
  // A helper that throws fails its rank, named, rather than the test process.
  const conformance::RankFailures errors =
      conformance::RunRankThreads(2, [&](int r) -> std::string {
        std::string error;
        const auto device = static_cast<uint32_t>(r);
        const std::vector<float> mine(kCount, static_cast<float>(r + 1));
        const std::vector<float> zeros(kCount, 0.0f);
        void* send = gpu->Allocate(device, kBytes);
        void* recv = gpu->Allocate(device, kBytes);
        gpu->Copy(device, send, CHORUS_HOST_DEVICE, mine.data(), kBytes);
        gpu->Copy(device, recv, CHORUS_HOST_DEVICE, zeros.data(), kBytes);
        cudaStream_t stream = nullptr;
        if (r == 1) {
          cudaSetDevice(r);
          cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        }
        chorus_all_reduce_args ar{};
        ar.struct_size = sizeof(ar);
        ar.send = send;
        ar.recv = recv;
        ar.count = kCount;
        ar.dtype = CHORUS_F32;
        ar.op = CHORUS_REDUCE_SUM;
        ar.stream = reinterpret_cast<chorus_stream*>(stream);
        chorus_request* request = nullptr;
        if (plugin->collective()->all_reduce(group.comm(r), &ar, &request) != CHORUS_OK) {
          error = "all_reduce: " + plugin->LastError();
        } else if (stream != nullptr && cudaStreamSynchronize(stream) != cudaSuccess) {
          error = "cudaStreamSynchronize failed";
        }
        auto& result = results[static_cast<size_t>(r)];
        result.resize(kCount);
        gpu->Copy(CHORUS_HOST_DEVICE, result.data(), device, recv, kBytes);
        gpu->Deallocate(device, send);
        gpu->Deallocate(device, recv);
        if (stream != nullptr) cudaStreamDestroy(stream);
        return error;
      });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(errors[r], "");
    ASSERT_EQ(results[r].size(), kCount);
    EXPECT_EQ(results[r].front(), 3.0f);
    EXPECT_EQ(results[r][kCount / 2], 3.0f);
    EXPECT_EQ(results[r].back(), 3.0f);
  }
}

}  // namespace
}  // namespace chorus
