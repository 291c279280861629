#include <chorus/base/error.h>
#include <chorus/distribute/dataset.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
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

void RequireBufferSize(int buffer_size, const std::string& what) {
  if (buffer_size < 1) {
    FailInvalidArgument(what + ": InputOptions::experimental_per_replica_buffer_size is " +
                        std::to_string(buffer_size) +
                        "; it must be at least 1 (the batches per replica prepared ahead)");
  }
}

// Where the replicas' batches go: their devices, or host memory without fetch_to_device. A cpu
// device's memory is host memory already; other replicas' batches go to the process's first cpu
// device.
std::vector<Device> Destinations(const std::vector<Device>& devices, const InputOptions& options) {
  if (options.experimental_fetch_to_device) return devices;
  std::vector<Device> destinations;
  for (const Device& device : devices) {
    if (device.info().kind == CHORUS_DEVICE_CPU) {
      destinations.push_back(device);
      continue;
    }
    const std::shared_ptr<DeviceEnumerator> cpu = Registry::Global().CpuDevices();
    if (cpu == nullptr || cpu->count() == 0) {
      throw Error(CHORUS_UNAVAILABLE,
                  "InputOptions::experimental_fetch_to_device = false keeps batches in host "
                  "memory, but the process has no cpu device to hold them");
    }
    destinations.push_back({cpu, 0});
  }
  return destinations;
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
                                                         int64_t total_replicas,
                                                         const InputOptions& options) {
  if (dataset.batch_size() == 0) {
    FailInvalidArgument(
        "experimental_distribute_dataset needs a batched dataset: call "
        "Batch(global_batch_size) first");
  }
  RequireDevices(devices, "experimental_distribute_dataset");
  RequireBufferSize(options.experimental_per_replica_buffer_size,
                    "experimental_distribute_dataset");
  if (total_replicas == 0) total_replicas = static_cast<int64_t>(devices.size());
  if (first_replica < 0 || first_replica + static_cast<int64_t>(devices.size()) > total_replicas) {
    FailInvalidArgument(
        "experimental_distribute_dataset: replicas " + std::to_string(first_replica) + ".." +
        std::to_string(first_replica + static_cast<int64_t>(devices.size()) - 1) +
        " are not among the " + std::to_string(total_replicas) + " replicas in sync");
  }
  DistributedDataset out;
  out.dataset_ = dataset;
  out.devices_ = Destinations(devices, options);
  out.options_ = options;
  out.first_replica_ = first_replica;
  out.total_replicas_ = total_replicas;
  return out;
}

DistributedDataset DistributedDataset::FromPerReplicaBatches(const Dataset& dataset,
                                                             const std::vector<Device>& devices,
                                                             const InputOptions& options) {
  if (dataset.batch_size() == 0) {
    FailInvalidArgument(
        "distribute_datasets_from_function needs a dataset batched per replica: call "
        "Batch(input_context.get_per_replica_batch_size(global_batch_size)) first");
  }
  RequireDevices(devices, "distribute_datasets_from_function");
  RequireBufferSize(options.experimental_per_replica_buffer_size,
                    "distribute_datasets_from_function");
  DistributedDataset out;
  out.dataset_ = dataset;
  out.devices_ = Destinations(devices, options);
  out.options_ = options;
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

DistributedIterator DistributedDataset::MakeIterator() const {
  return DistributedIterator([dataset = *this](int64_t step) { return dataset.Get(step); },
                             num_steps(), options_.experimental_per_replica_buffer_size);
}

// ---- DistributedIterator -------------------------------------------------------------------

struct DistributedIterator::State {
  // A prepared step: its batches, or the exception preparing them threw.
  struct Prepared {
    DistributedBatch batch;
    std::exception_ptr error;
  };

  std::function<DistributedBatch(int64_t)> prepare;
  int64_t num_steps = 0;
  size_t capacity = 1;
  std::mutex mutex;
  std::condition_variable room;    // a step was taken, or stop was set
  std::condition_variable filled;  // a step (or its error) was queued
  std::deque<Prepared> ready;      // guarded by mutex
  bool stop = false;               // guarded by mutex
  std::thread thread;

  void Run() {
    for (int64_t step = 0; step < num_steps; ++step) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        room.wait(lock, [&] { return stop || ready.size() < capacity; });
        if (stop) return;
      }
      Prepared prepared;
      try {
        prepared.batch = prepare(step);
      } catch (...) {
        prepared.error = std::current_exception();
      }
      const bool failed = prepared.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex);
        ready.push_back(std::move(prepared));
      }
      filled.notify_one();
      // The caller gets the error at this step; nothing after it is prepared.
      if (failed) return;
    }
  }
};

DistributedIterator::DistributedIterator(std::function<DistributedBatch(int64_t step)> prepare,
                                         int64_t num_steps, int buffer_size) {
  RequireBufferSize(buffer_size, "DistributedIterator");
  if (num_steps < 0) {
    FailInvalidArgument("DistributedIterator: num_steps is " + std::to_string(num_steps) +
                        "; it must be at least 0");
  }
  if (!prepare) FailInvalidArgument("DistributedIterator: the step function is empty");
  state_ = std::make_unique<State>();
  state_->prepare = std::move(prepare);
  state_->num_steps = num_steps;
  state_->capacity = static_cast<size_t>(buffer_size);
  // The thread keeps the State's address, which moving the iterator does not change.
  state_->thread = std::thread([state = state_.get()] { state->Run(); });
}

DistributedIterator::~DistributedIterator() { Stop(); }

DistributedIterator::DistributedIterator(DistributedIterator&& other) noexcept
    : state_(std::move(other.state_)), taken_(std::exchange(other.taken_, 0)) {}

DistributedIterator& DistributedIterator::operator=(DistributedIterator&& other) noexcept {
  if (this != &other) {
    Stop();
    state_ = std::move(other.state_);
    taken_ = std::exchange(other.taken_, 0);
  }
  return *this;
}

void DistributedIterator::Stop() {
  if (state_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->room.notify_all();
  // The thread leaves at its next wait, or after the step it is preparing.
  if (state_->thread.joinable()) state_->thread.join();
  state_.reset();
}

std::optional<DistributedBatch> DistributedIterator::GetNext() {
  if (state_ == nullptr)
    FailInvalidArgument("DistributedIterator: GetNext on a moved-from iterator");
  if (taken_ == state_->num_steps) return std::nullopt;
  std::unique_lock<std::mutex> lock(state_->mutex);
  // No time-out: until the caller destroys the iterator (which it cannot while it waits here),
  // the thread queues every step up to num_steps, or the error that ends it.
  state_->filled.wait(lock, [&] { return !state_->ready.empty(); });
  State::Prepared& front = state_->ready.front();
  // The error stays at the front of the queue: every later call rethrows it.
  if (front.error != nullptr) std::rethrow_exception(front.error);
  DistributedBatch batch = std::move(front.batch);
  state_->ready.pop_front();
  lock.unlock();
  state_->room.notify_one();
  ++taken_;
  return batch;
}

}  // namespace chorus
