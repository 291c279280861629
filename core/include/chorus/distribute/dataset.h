// Input: an in-memory dataset of labelled examples, batched; its distribution across replicas
// (experimental_distribute_dataset, distribute_datasets_from_function) and InputContext.
#ifndef CHORUS_DATASET_H_
#define CHORUS_DATASET_H_

#include <chorus/runtime/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
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

// The steps of a distributed dataset, each a DistributedBatch on the replicas' devices.
class DistributedDataset {
 public:
  // A global-batch dataset split across `devices` (experimental_distribute_dataset): each
  // global batch of b examples gives replica i the examples [i*c, min((i+1)*c, b)) with
  // c = ceil(batch_size / replicas), so a short final batch leaves the last replicas empty.
  // With several workers, every worker reads the same global batches and keeps the slices of
  // its own replicas: global replicas [first_replica, first_replica + devices.size()) of
  // total_replicas (0 = devices.size()).
  static DistributedDataset FromGlobalBatches(const Dataset& dataset,
                                              const std::vector<Device>& devices,
                                              int64_t first_replica = 0,
                                              int64_t total_replicas = 0);
  // This input pipeline's dataset, batched per replica (distribute_datasets_from_function),
  // feeding devices.size() replicas: step s gives replica r batch s * replicas + r.
  static DistributedDataset FromPerReplicaBatches(const Dataset& dataset,
                                                  const std::vector<Device>& devices);

  int64_t num_steps() const;
  DistributedBatch Get(int64_t step) const;

 private:
  Dataset dataset_;
  std::vector<Device> devices_;
  bool per_replica_ = false;
  int64_t first_replica_ = 0;
  int64_t total_replicas_ = 0;  // over every worker
};

}  // namespace chorus

#endif  // CHORUS_DATASET_H_
