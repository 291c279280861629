// The cross-device ops sweep: every operation x dtype x reduce op x element count x replica
// count, on the core's cpu devices (host memory, so the kit runs anywhere), checked element by
// element against the host reference in reference.h. Ops that declare an operation only on the
// memory of one of the plugin's own device enumerators (the tpu plugin's "pjrt" devices) are
// swept on that enumerator's devices instead, every buffer written and read through its copy.
//
// One test per (operation, dtype), e.g. CrossDeviceOps.AllReduceInPlace/f16, so a filter picks
// one; a test stops after kMaxFailures failing cases and names each case it failed. ReduceScatter
// (ABI 1.5) is registered only for a table whose reduce_scatter is not NULL: without one the core
// does it itself, and there is nothing of the plugin's to check.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <utility>

#include "ops_driver.h"
#include "reference.h"
#include "reused_bytes.h"
#include "suite.h"

namespace chorus::conformance::internal {
namespace {

constexpr uint32_t kCpuDevices = 8;
constexpr size_t kReplicaCounts[] = {1, 2, 3, 4, 8};
constexpr size_t kLargeCount = 262147;  // 2^18 + 3: past any small-buffer path, odd
constexpr int kMaxFailures = 3;
constexpr unsigned char kPoison = 0x7f;  // fills outputs: no expected value has these bytes

enum class Kind {
  kAllReduceInPlace,     // reduce with outputs == inputs
  kAllReduceOutOfPlace,  // reduce into one new buffer per replica; inputs must not change
  kReduceToOneDevice,    // reduce into one buffer, on the last replica's device
  kBatchReduce,          // five all-reduces of mixed sizes (incl. 0 and 1) in one call
  kBroadcast,            // one replica's buffer to every replica
  kAllGather,            // uneven per-replica counts, concatenated on every replica
  kReduceScatter,        // 1.5, where reduce_scatter is not NULL: replica r gets part r
};

struct KindInfo {
  Kind kind;
  const char* name;
  bool reduces;
  chorus_collective_op op;  // what capabilities call it
};

constexpr KindInfo kKinds[] = {
    {Kind::kAllReduceInPlace, "AllReduceInPlace", true, CHORUS_OP_ALL_REDUCE},
    {Kind::kAllReduceOutOfPlace, "AllReduceOutOfPlace", true, CHORUS_OP_ALL_REDUCE},
    {Kind::kReduceToOneDevice, "ReduceToOneDevice", true, CHORUS_OP_ALL_REDUCE},
    {Kind::kBatchReduce, "BatchReduce", true, CHORUS_OP_ALL_REDUCE},
    {Kind::kBroadcast, "Broadcast", false, CHORUS_OP_BROADCAST},
    {Kind::kAllGather, "AllGather", false, CHORUS_OP_ALL_GATHER},
    {Kind::kReduceScatter, "ReduceScatter", true, CHORUS_OP_REDUCE_SCATTER},
};

const std::vector<chorus_reduce_op>& AllReduceOps() {
  static const std::vector<chorus_reduce_op> ops = {CHORUS_REDUCE_SUM, CHORUS_REDUCE_PROD,
                                                    CHORUS_REDUCE_MIN, CHORUS_REDUCE_MAX,
                                                    CHORUS_REDUCE_MEAN};
  return ops;
}

// Replica k sits on device (3k + 1) mod n of n devices (n - 1 - k where 3 divides n): not 0, 1,
// 2, ... in order, so a plugin that confuses a replica's position with its device index fails.
std::vector<uint32_t> ReplicaDevices(size_t replicas, size_t devices) {
  std::vector<uint32_t> indices;
  for (size_t k = 0; k < replicas; ++k) {
    indices.push_back(
        static_cast<uint32_t>(devices % 3 != 0 ? (3 * k + 1) % devices : devices - 1 - k));
  }
  return indices;
}

// Where a sweep runs: the core's cpu devices, or the devices of the plugin's enumerator whose
// memory the ops declare the operation on (and not on host memory).
struct SweepDevices {
  std::shared_ptr<DeviceEnumerator> enumerator;
  std::string words;      // "cpu devices", "'pjrt' devices"
  bool declared = false;  // the ops declare the operation there (--require fails a "not here")
};

SweepDevices DevicesFor(const Suite& suite, const chorus_cross_device_ops_api& api,
                        chorus_collective_op op) {
  if (!DeclaresOnCpuDevices(api, op)) {
    const auto& enumerators = suite.plugin().device_enumerators();
    for (size_t i = 0; i < enumerators.size(); ++i) {
      if (!DeclaresOnMemory(api, op, enumerators[i]->platform)) continue;
      std::shared_ptr<DeviceEnumerator> devices = suite.PluginDevices(i);
      if (devices != nullptr && devices->count() > 0) {
        return {devices, "'" + devices->platform() + "' devices", true};
      }
    }
  }
  return {suite.CpuDevices(kCpuDevices), "cpu devices", DeclaresOnCpuDevices(api, op)};
}

std::vector<size_t> Counts() { return {0, 1, kOddCount, kLargeCount}; }

// Device memory holding `tensor`, or `count` poisoned elements.
DeviceBuffer Upload(const Device& device, const HostTensor& tensor) {
  DeviceBuffer buffer(device, tensor.bytes());
  buffer.CopyFromHost(tensor.data(), tensor.bytes());
  return buffer;
}
DeviceBuffer Poisoned(const Device& device, chorus_dtype dtype, size_t count) {
  std::vector<unsigned char> poison = TakeZeroedBytes(count * chorus_dtype_size(dtype));
  std::fill(poison.begin(), poison.end(), kPoison);
  DeviceBuffer buffer(device, poison.size());
  buffer.CopyFromHost(poison.data(), poison.size());
  GiveBackBytes(std::move(poison));
  return buffer;
}
HostTensor Download(const DeviceBuffer& buffer, chorus_dtype dtype, size_t count) {
  HostTensor tensor(dtype, count);
  buffer.CopyToHost(tensor.data(), tensor.bytes());
  return tensor;
}

// One replica set: the ops under test over cpu devices.
struct Replicas {
  std::vector<Device> devices;
  OpsDriver* ops;
};

// One all-reduce's data: inputs on every replica, and the expected result.
struct ReduceData {
  std::vector<HostTensor> host;
  std::vector<DeviceBuffer> inputs;
  HostTensor expected{CHORUS_F32, 0};
};

ReduceData MakeReduceData(const Replicas& replicas, chorus_dtype dtype, chorus_reduce_op op,
                          size_t count, size_t offset) {
  ReduceData data;
  for (size_t r = 0; r < replicas.devices.size(); ++r) {
    data.host.emplace_back(dtype, count);
    data.host.back().Fill(PatternFor(op), r, offset);
    data.inputs.push_back(Upload(replicas.devices[r], data.host.back()));
  }
  data.expected = ExpectedReduce(op, data.host);
  return data;
}

std::vector<chorus_buffer> Buffers(const std::vector<DeviceBuffer>& buffers) {
  std::vector<chorus_buffer> out;
  for (const auto& b : buffers) out.push_back(b.buffer());
  return out;
}

double Tolerance(chorus_reduce_op op, chorus_dtype dtype) {
  // MEAN's divide may round a float once more than the reference does.
  return op == CHORUS_REDUCE_MEAN ? 2 * Epsilon(dtype) : 0;
}

testing::AssertionResult CheckOutputs(const std::vector<DeviceBuffer>& outputs,
                                      const HostTensor& expected, double tolerance,
                                      const char* what) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto same =
        SameValues(Download(outputs[k], expected.dtype(), expected.count()), expected, tolerance);
    if (!same) {
      return testing::AssertionFailure() << what << " " << k << " (on device "
                                         << outputs[k].device().index << "): " << same.message();
    }
  }
  return testing::AssertionSuccess();
}

// Elements [first, first + count) of `tensor`.
HostTensor Slice(const HostTensor& tensor, size_t first, size_t count) {
  HostTensor part(tensor.dtype(), count);
  if (part.bytes() > 0) {  // data() of an empty tensor may be NULL
    std::memcpy(part.data(),
                static_cast<const char*>(tensor.data()) + first * chorus_dtype_size(tensor.dtype()),
                part.bytes());
  }
  return part;
}

testing::AssertionResult CheckUnchanged(const std::vector<DeviceBuffer>& buffers,
                                        const std::vector<HostTensor>& host) {
  for (size_t r = 0; r < buffers.size(); ++r) {
    if (!(Download(buffers[r], host[r].dtype(), host[r].count()) == host[r])) {
      return testing::AssertionFailure() << "input " << r << " was modified by an out-of-place "
                                         << "operation; inputs are read-only";
    }
  }
  return testing::AssertionSuccess();
}

testing::AssertionResult RunReduce(const Replicas& replicas, Kind kind, chorus_dtype dtype,
                                   chorus_reduce_op op, size_t count) {
  const double tolerance = Tolerance(op, dtype);
  if (kind == Kind::kBatchReduce) {
    const size_t counts[] = {count, 0, 1, 17, count / 3 + 2};
    std::vector<ReduceData> data;
    std::vector<std::vector<DeviceBuffer>> outputs;
    std::vector<ReduceCall> calls;
    for (size_t t = 0; t < std::size(counts); ++t) {
      data.push_back(MakeReduceData(replicas, dtype, op, counts[t], 1000 * t));
      outputs.emplace_back();
      for (const auto& device : replicas.devices) {
        outputs.back().push_back(Poisoned(device, dtype, counts[t]));
      }
      calls.push_back({dtype, counts[t], Buffers(data.back().inputs), Buffers(outputs.back())});
    }
    auto result = replicas.ops->BatchReduce(op, calls);
    for (size_t t = 0; result && t < std::size(counts); ++t) {
      result = CheckOutputs(outputs[t], data[t].expected, tolerance, "output");
      if (!result) result << " (batch member " << t << " of " << counts[t] << " elements)";
      if (result) result = CheckUnchanged(data[t].inputs, data[t].host);
    }
    return result;
  }

  ReduceData data = MakeReduceData(replicas, dtype, op, count, 0);
  std::vector<DeviceBuffer> outputs;
  if (kind == Kind::kAllReduceOutOfPlace) {
    for (const auto& device : replicas.devices) outputs.push_back(Poisoned(device, dtype, count));
  } else if (kind == Kind::kReduceToOneDevice) {
    outputs.push_back(Poisoned(replicas.devices.back(), dtype, count));
  }
  const bool in_place = kind == Kind::kAllReduceInPlace;
  const ReduceCall call{dtype, count, Buffers(data.inputs),
                        Buffers(in_place ? data.inputs : outputs)};
  auto result = replicas.ops->Reduce(op, call);
  if (result) {
    result = CheckOutputs(in_place ? data.inputs : outputs, data.expected, tolerance, "output");
  }
  if (result && !in_place) result = CheckUnchanged(data.inputs, data.host);
  return result;
}

testing::AssertionResult RunBroadcast(const Replicas& replicas, chorus_dtype dtype, size_t count) {
  const size_t root = replicas.devices.size() / 2;
  HostTensor host(dtype, count);
  host.Fill(Pattern::kData, root);
  std::vector<HostTensor> sources{host};
  std::vector<DeviceBuffer> source;
  source.push_back(Upload(replicas.devices[root], host));
  std::vector<DeviceBuffer> outputs;
  for (const auto& device : replicas.devices) outputs.push_back(Poisoned(device, dtype, count));
  auto result = replicas.ops->Broadcast(dtype, count, source[0].buffer(), Buffers(outputs));
  if (result) result = CheckOutputs(outputs, host, 0, "output");
  if (result) result = CheckUnchanged(source, sources);
  if (!result) result << " (source: replica " << root << ")";
  return result;
}

testing::AssertionResult RunAllGather(const Replicas& replicas, chorus_dtype dtype, size_t count) {
  const size_t n = replicas.devices.size();
  std::vector<size_t> counts;
  std::vector<HostTensor> host;
  std::vector<DeviceBuffer> inputs, outputs;
  size_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    counts.push_back(count * (r + 1) / n);  // uneven: replica r holds (r+1)/n of count
    total += counts.back();
    host.emplace_back(dtype, counts.back());
    host.back().Fill(Pattern::kData, r);
    inputs.push_back(Upload(replicas.devices[r], host.back()));
  }
  HostTensor expected(dtype, total);  // the inputs one after the other
  size_t offset = 0;
  for (const auto& h : host) {
    if (h.bytes() > 0) {  // data() of an empty tensor may be NULL
      std::memcpy(static_cast<char*>(expected.data()) + offset, h.data(), h.bytes());
    }
    offset += h.bytes();
  }
  for (const auto& device : replicas.devices) outputs.push_back(Poisoned(device, dtype, total));
  auto result = replicas.ops->AllGather(dtype, Buffers(inputs), counts, Buffers(outputs));
  if (result) result = CheckOutputs(outputs, expected, 0, "output");
  if (result) result = CheckUnchanged(inputs, host);
  if (!result) {
    result << " (counts";
    for (size_t c : counts) result << " " << c;
    result << ")";
  }
  return result;
}

// Every replica's input holds count x replicas elements; output r gets part r of the reduction.
testing::AssertionResult RunReduceScatter(const Replicas& replicas, chorus_dtype dtype,
                                          chorus_reduce_op op, size_t count) {
  const size_t n = replicas.devices.size();
  const ReduceData data = MakeReduceData(replicas, dtype, op, count * n, 0);
  std::vector<DeviceBuffer> outputs;
  for (const auto& device : replicas.devices) outputs.push_back(Poisoned(device, dtype, count));
  auto result =
      replicas.ops->ReduceScatter(op, dtype, count, Buffers(data.inputs), Buffers(outputs));
  if (!result) return result;
  for (size_t r = 0; r < n; ++r) {
    auto same = SameValues(Download(outputs[r], dtype, count),
                           Slice(data.expected, r * count, count), Tolerance(op, dtype));
    if (!same) {
      return testing::AssertionFailure()
             << "output " << r << " (on device " << outputs[r].device().index << "; part " << r
             << ", elements [" << r * count << ", " << (r + 1) * count
             << ") of the reduction): " << same.message();
    }
  }
  return CheckUnchanged(data.inputs, data.host);
}

// What plugin.h asks of `kind`, for a failure message: the change a failing plugin needs.
const char* Requirement(Kind kind) {
  switch (kind) {
    case Kind::kAllReduceInPlace:
      return "with outputs == inputs, every buffer must end up holding the elementwise reduction "
             "of all inputs (MEAN arrives as SUM; the core divides)";
    case Kind::kAllReduceOutOfPlace:
      return "every output must hold the elementwise reduction of all inputs, on its own device, "
             "and the inputs must stay unchanged";
    case Kind::kReduceToOneDevice:
      return "the one output (on the last replica's device) must hold the elementwise reduction "
             "of all inputs, and the inputs must stay unchanged";
    case Kind::kBatchReduce:
      return "each member of the batch (counts 0 and 1 included) must be reduced as one reduce "
             "call would be";
    case Kind::kBroadcast:
      return "every output must hold the source's count elements, and the source must stay "
             "unchanged";
    case Kind::kAllGather:
      return "every output must hold the inputs in replica order, input r's counts[r] elements "
             "each, and the inputs must stay unchanged";
    case Kind::kReduceScatter:
      return "output j must hold part j (elements [j*count, (j+1)*count)) of the elementwise "
             "reduction of all inputs, each input holding count x replicas elements, and the "
             "inputs must stay unchanged (MEAN arrives as SUM; the core divides)";
  }
  return "";
}

std::string Describe(const KindInfo& kind, chorus_dtype dtype, const chorus_reduce_op* op,
                     size_t count, const std::vector<uint32_t>& indices,
                     const std::string& devices) {
  std::ostringstream out;
  out << kind.name << " " << DtypeName(dtype);
  if (op != nullptr) out << " " << ReduceOpName(*op);
  out << ", count " << count << ", " << indices.size() << " replica(s) on " << devices << " {";
  for (size_t k = 0; k < indices.size(); ++k) out << (k ? "," : "") << indices[k];
  out << "}";
  return out.str();
}

void Sweep(const Suite& suite, const chorus_cross_device_ops_api& api, const KindInfo& kind,
           chorus_dtype dtype) {
  const SweepDevices sweep = DevicesFor(suite, api, kind.op);
  const auto& cpu = sweep.enumerator;
  int failures = 0;
  std::unique_ptr<OpsDriver> ops;
  // False when the test should stop: too many failures, or a "not here" answer (a skip, or under
  // --require for what the ops declare, a failure).
  auto report = [&](const std::string& what, const testing::AssertionResult& result) {
    if (result) return true;
    if (IsNotHere(ops->last_status())) {
      FailOrSkipNotHere(suite, ops->last_status(), sweep.declared, what, result.message());
      return false;
    }
    ADD_FAILURE() << what << ": " << result.message() << "\n  plugin.h: " << Requirement(kind.kind);
    if (++failures < kMaxFailures) return true;
    ADD_FAILURE() << "stopping after " << kMaxFailures
                  << " failing cases; fix those above and run again";
    return false;
  };
  for (size_t n : kReplicaCounts) {
    if (n > cpu->count()) break;
    const auto indices = ReplicaDevices(n, cpu->count());
    std::string message;
    const chorus_status status = OpsDriver::Create(suite, api, cpu, indices, &ops, &message);
    if (IsNotHere(status)) {
      FailOrSkipNotHere(suite, status, sweep.declared,
                        "create over " + std::to_string(n) + " " + sweep.words, message);
      return;
    }
    ASSERT_EQ(status, CHORUS_OK) << "create over " << n << " " << sweep.words << ": "
                                 << StatusName(status) << ": " << message
                                 << "; create must return CHORUS_OK over 1 to " << cpu->count()
                                 << " of the " << sweep.words
                                 << " (or UNSUPPORTED when it declares no memory of theirs)";
    Replicas replicas{{}, ops.get()};
    for (uint32_t index : indices) replicas.devices.push_back(Device{cpu, index});

    for (size_t count : Counts()) {
      if (kind.reduces) {
        for (chorus_reduce_op op : AllReduceOps()) {
          if (!InSweep(dtype, op, count)) continue;
          const auto result = kind.kind == Kind::kReduceScatter
                                  ? RunReduceScatter(replicas, dtype, op, count)
                                  : RunReduce(replicas, kind.kind, dtype, op, count);
          if (!report(Describe(kind, dtype, &op, count, indices, sweep.words), result)) {
            return;
          }
        }
      } else {
        if (!InSweep(dtype, CHORUS_REDUCE_SUM, count)) continue;
        const auto result = kind.kind == Kind::kBroadcast ? RunBroadcast(replicas, dtype, count)
                                                          : RunAllGather(replicas, dtype, count);
        if (!report(Describe(kind, dtype, nullptr, count, indices, sweep.words), result)) return;
      }
    }
  }
}

}  // namespace

void RegisterCrossDeviceOpsTests(const SuitePtr& suite) {
  const auto& all = suite->plugin().cross_device_ops_list();
  for (const chorus_cross_device_ops_api* api : all) {
    // CrossDeviceOps.<kind>/<dtype>, and /<name> when the plugin has several.
    const std::string of = all.size() > 1 ? std::string("/") + api->name : "";
    for (const KindInfo& kind : kKinds) {
      // reduce_scatter (1.5) is optional: without it the core reduces and copies each part.
      if (kind.kind == Kind::kReduceScatter && api->reduce_scatter == nullptr) continue;
      for (chorus_dtype dtype : Dtypes()) {
        AddTest("CrossDeviceOps", std::string(kind.name) + "/" + DtypeName(dtype) + of,
                [suite, api, kind, dtype] { Sweep(*suite, *api, kind, dtype); });
      }
    }
  }
}

}  // namespace chorus::conformance::internal
