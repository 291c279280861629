// Input: an in-memory dataset of labelled examples, batched; its distribution across replicas
// (experimental_distribute_dataset, distribute_datasets_from_function) with InputOptions and
// InputContext, and the iterator that prepares its steps ahead on a background thread.
#ifndef CHORUS_DATASET_H_
#define CHORUS_DATASET_H_

#include <chorus/runtime/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace chorus {

// One batch in host memory: features [size, example_shape...] and labels [size].
struct HostBatch {
  Shape feature_shape;
  std::vector<float> features;
  std::vector<int32_t> labels;
  int64_t size = 0;
};

// Immutable; every method returns a new dataset sharing the examples.
class Dataset {
 public:
  // `features` holds labels.size() examples of `example_shape` each, row after row.
  static Dataset FromExamples(Shape example_shape, std::vector<float> features,
                              std::vector<int32_t> labels);

  int64_t num_examples() const;
  const Shape& example_shape() const;
  // A deterministic permutation of the examples (same seed, same order).
  Dataset Shuffle(uint64_t seed) const;
  // Every num_shards-th example starting at index (tf.data.Dataset.shard).
  Dataset Shard(int64_t num_shards, int64_t index) const;
  // The first `count` examples (unbatched) or batches (batched); -1 or more than there are takes
  // everything.
  Dataset Take(int64_t count) const;
  // Groups examples into batches; the last one is shorter unless drop_remainder (which also
  // drops those examples from num_examples()).
  Dataset Batch(int64_t batch_size, bool drop_remainder = false) const;

  int64_t batch_size() const;  // 0 while unbatched
  bool drop_remainder() const;
  int64_t num_batches() const;  // unbatched: one "batch" per example
  HostBatch GetBatch(int64_t index) const;

 private:
  struct Examples;
  std::shared_ptr<const Examples> examples_;
  std::vector<int64_t> order_;  // indices into examples_
  int64_t batch_size_ = 0;
  bool drop_remainder_ = false;
};

// One replica's batch on its device: features f32 [size, ...], labels i32 [size].
struct Batch {
  Tensor features;
  Tensor labels;
  int64_t size = 0;
};

// The batch copied to host memory (features flattened, labels), whatever its device.
HostBatch CopyToHost(const Batch& batch);
// Its labels alone, copied to host memory.
std::vector<int32_t> CopyLabelsToHost(const Batch& batch);

// One step's input: a batch per replica (some may be empty on a short final batch).
struct DistributedBatch {
  std::vector<Batch> replicas;
  int64_t global_size = 0;  // examples in this step, over every replica
};

// tf.distribute.InputContext.
class InputContext {
 public:
  InputContext(int num_input_pipelines, int input_pipeline_id, int num_replicas_in_sync);
  int num_input_pipelines() const { return num_input_pipelines_; }
  int input_pipeline_id() const { return input_pipeline_id_; }
  int num_replicas_in_sync() const { return num_replicas_in_sync_; }
  // global / num_replicas_in_sync; Error(INVALID_ARGUMENT) when it does not divide.
  int64_t get_per_replica_batch_size(int64_t global_batch_size) const;

 private:
  int num_input_pipelines_, input_pipeline_id_, num_replicas_in_sync_;
};

// tf.distribute.InputOptions: where a distributed dataset puts the replicas' batches, and how far
// its iterator prepares them ahead.
struct InputOptions {
  // true: each replica's batch is copied to the replica's device. false: the batch stays in host
  // memory, so the replica's step gets host tensors (on a cpu device: the replica's own device
  // when its memory is host memory, else one of the process's cpu devices) and copies what it
  // needs itself.
  bool experimental_fetch_to_device = true;
  // Up to this many batches per replica are prepared (read, sliced and copied to the devices)
  // by a DistributedIterator's background thread ahead of the step that needs them, so that the
  // copies overlap the steps before (TensorFlow's prefetch to device). At least 1. Get(step)
  // prepares its step on the caller's thread and does not use it.
  int experimental_per_replica_buffer_size = 1;
};

class DistributedIterator;

// The steps of a distributed dataset, each a DistributedBatch on the replicas' devices.
class DistributedDataset {
 public:
  // A global-batch dataset split across `devices` (experimental_distribute_dataset): each
  // global batch of b examples gives replica i the examples [i*c, min((i+1)*c, b)) with
  // c = ceil(batch_size / replicas), so a short final batch leaves the last replicas empty.
  // With several workers, every worker reads the same global batches and keeps the slices of
  // its own replicas: global replicas [first_replica, first_replica + devices.size()) of
  // total_replicas (0 = devices.size()). Error(INVALID_ARGUMENT) for a buffer size below 1.
  static DistributedDataset FromGlobalBatches(const Dataset& dataset,
                                              const std::vector<Device>& devices,
                                              int64_t first_replica = 0, int64_t total_replicas = 0,
                                              const InputOptions& options = {});
  // This input pipeline's dataset, batched per replica (distribute_datasets_from_function),
  // feeding devices.size() replicas: step s gives replica r batch s * replicas + r.
  static DistributedDataset FromPerReplicaBatches(const Dataset& dataset,
                                                  const std::vector<Device>& devices,
                                                  const InputOptions& options = {});

  int64_t num_steps() const;
  const InputOptions& options() const { return options_; }
  // Step `step`, prepared on the calling thread (random access, no prefetch).
  DistributedBatch Get(int64_t step) const;
  // The steps in order, each prepared ahead on a background thread, up to
  // options().experimental_per_replica_buffer_size steps ahead (iter(dist_dataset)).
  DistributedIterator MakeIterator() const;

 private:
  Dataset dataset_;
  // Where each replica's batch goes: the replica's device, or host memory when
  // !options_.experimental_fetch_to_device.
  std::vector<Device> devices_;
  InputOptions options_;
  bool per_replica_ = false;
  int64_t first_replica_ = 0;
  int64_t total_replicas_ = 0;  // over every worker
};

// tf.distribute.DistributedIterator: steps 0, 1, ... num_steps - 1 of a step function (a
// DistributedDataset's Get), each prepared by a background thread up to buffer_size steps ahead
// of GetNext, in a bounded queue. One thread calls GetNext. Destroying the iterator mid-epoch
// wakes the background thread and joins it, after the step it is preparing if it is in one.
class DistributedIterator {
 public:
  // Starts the background thread. Error(INVALID_ARGUMENT) unless buffer_size >= 1 and
  // num_steps >= 0. DistributedDataset::MakeIterator is the usual way to make one.
  DistributedIterator(std::function<DistributedBatch(int64_t step)> prepare, int64_t num_steps,
                      int buffer_size);
  ~DistributedIterator();
  DistributedIterator(DistributedIterator&& other) noexcept;
  DistributedIterator& operator=(DistributedIterator&& other) noexcept;

  // The next step's batches (waiting for the background thread when it is not ready);
  // std::nullopt after the last step (get_next_as_optional). An exception the background thread
  // met preparing this step is rethrown here, and by every later call.
  std::optional<DistributedBatch> GetNext();
  // Steps GetNext has returned.
  int64_t steps_taken() const { return taken_; }

 private:
  struct State;
  void Stop();

  std::unique_ptr<State> state_;
  int64_t taken_ = 0;
};

}  // namespace chorus

#endif  // CHORUS_DATASET_H_
