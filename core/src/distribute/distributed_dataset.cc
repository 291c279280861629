#include <chorus/base/error.h>
#include <chorus/distribute/dataset.h>

#include <algorithm>
#include <string>
#include <utility>

namespace chorus {
namespace {

[[noreturn]] void FailInvalidArgument(const std::string& message) {
  throw Error(CHORUS_INVALID_ARGUMENT, message);
}

void RequireDevices(const std::vector<Device>& devices, const char* what) {
  if (devices.empty())
    FailInvalidArgument(std::string(what) + " needs at least one replica device");
  for (const Device& device : devices) {
    if (!device.enumerator)
      FailInvalidArgument(std::string(what) + ": a replica device has no enumerator");
  }
}

// Examples [begin, end) of `host` as a Batch on `device`; an empty range gives tensors of shape
// [0, ...] and [0].
Batch ToDevice(const HostBatch& host, int64_t begin, int64_t end, const Device& device) {
  const int64_t row = host.size > 0 ? static_cast<int64_t>(host.features.size()) / host.size : 0;
  Shape feature_shape = host.feature_shape;
  feature_shape[0] = end - begin;
  Batch batch;
  batch.size = end - begin;
  // Straight from the host batch into uninitialised device tensors, through the enumerator's
  // copy, so that device memory that is not host memory works too.
  batch.features = Tensor::Uninitialized(device, CHORUS_F32, std::move(feature_shape));
  batch.labels = Tensor::Uninitialized(device, CHORUS_I32, {batch.size});
  if (batch.size > 0) {
    batch.features.CopyFromHost(host.features.data() + begin * row);
    batch.labels.CopyFromHost(host.labels.data() + begin);
  }
  return batch;
}

// An empty batch shaped like the dataset's examples, for a replica past the end.
Batch EmptyBatch(const Dataset& dataset, const Device& device) {
  HostBatch host;
  host.feature_shape = {0};
  host.feature_shape.insert(host.feature_shape.end(), dataset.example_shape().begin(),
                            dataset.example_shape().end());
  return ToDevice(host, 0, 0, device);
}

}  // namespace

std::vector<int32_t> CopyLabelsToHost(const Batch& batch) {
  std::vector<int32_t> labels(static_cast<size_t>(batch.size));
  if (batch.size > 0) {
    const Device& device = batch.labels.device();
    device.enumerator->Copy(CHORUS_HOST_DEVICE, labels.data(), device.index, batch.labels.raw(),
                            batch.labels.bytes());
  }
  return labels;
}

HostBatch CopyToHost(const Batch& batch) {
  HostBatch host;
  host.size = batch.size;
  host.feature_shape = batch.features.shape();
  host.features = batch.features.ToVector();
  host.labels = CopyLabelsToHost(batch);
  return host;
}

DistributedDataset DistributedDataset::FromGlobalBatches(const Dataset& dataset,
                                                         const std::vector<Device>& devices,
                                                         int64_t first_replica,
                                                         int64_t total_replicas) {
  if (dataset.batch_size() == 0) {
    FailInvalidArgument(
        "experimental_distribute_dataset needs a batched dataset: call "
        "Batch(global_batch_size) first");
  }
  RequireDevices(devices, "experimental_distribute_dataset");
  if (total_replicas == 0) total_replicas = static_cast<int64_t>(devices.size());
  if (first_replica < 0 || first_replica + static_cast<int64_t>(devices.size()) > total_replicas) {
    FailInvalidArgument(
        "experimental_distribute_dataset: replicas " + std::to_string(first_replica) + ".." +
        std::to_string(first_replica + static_cast<int64_t>(devices.size()) - 1) +
        " are not among the " + std::to_string(total_replicas) + " replicas in sync");
  }
  DistributedDataset out;
  out.dataset_ = dataset;
  out.devices_ = devices;
  out.first_replica_ = first_replica;
  out.total_replicas_ = total_replicas;
  return out;
}

DistributedDataset DistributedDataset::FromPerReplicaBatches(const Dataset& dataset,
                                                             const std::vector<Device>& devices) {
  if (dataset.batch_size() == 0) {
    FailInvalidArgument(
        "distribute_datasets_from_function needs a dataset batched per replica: call "
        "Batch(input_context.get_per_replica_batch_size(global_batch_size)) first");
  }
  RequireDevices(devices, "distribute_datasets_from_function");
  DistributedDataset out;
  out.dataset_ = dataset;
  out.devices_ = devices;
  out.per_replica_ = true;
  return out;
}

int64_t DistributedDataset::num_steps() const {
  if (!per_replica_) return dataset_.num_batches();
  const auto replicas = static_cast<int64_t>(devices_.size());
  return replicas == 0 ? 0 : (dataset_.num_batches() + replicas - 1) / replicas;
}

DistributedBatch DistributedDataset::Get(int64_t step) const {
  if (step < 0 || step >= num_steps()) {
    FailInvalidArgument("DistributedDataset: step " + std::to_string(step) +
                        " is out of range; the dataset has " + std::to_string(num_steps()) +
                        " steps");
  }
  const auto replicas = static_cast<int64_t>(devices_.size());
  DistributedBatch out;
  if (per_replica_) {
    for (int64_t r = 0; r < replicas; ++r) {
      const Device& device = devices_[static_cast<size_t>(r)];
      const int64_t index = step * replicas + r;
      if (index >= dataset_.num_batches()) {
        out.replicas.push_back(EmptyBatch(dataset_, device));
        continue;
      }
      const HostBatch host = dataset_.GetBatch(index);
      out.replicas.push_back(ToDevice(host, 0, host.size, device));
      out.global_size += host.size;
    }
    return out;
  }
  const HostBatch host = dataset_.GetBatch(step);
  const int64_t chunk = (dataset_.batch_size() + total_replicas_ - 1) / total_replicas_;
  for (int64_t r = 0; r < replicas; ++r) {
    const int64_t begin = std::min((first_replica_ + r) * chunk, host.size);
    const int64_t end = std::min(begin + chunk, host.size);
    out.replicas.push_back(ToDevice(host, begin, end, devices_[static_cast<size_t>(r)]));
  }
  out.global_size = host.size;
  return out;
}

}  // namespace chorus
