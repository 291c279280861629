// The tutorial under ParameterServerStrategy: the model's variables on the ps tasks (the kernels
// split by a MinSizePartitioner, as TensorFlow's parameter-server tutorial does), each training
// step a function the chief schedules on a worker, which reads the weights, computes the
// gradients on its own dataset's next batch and has the ps tasks apply Adam. Asynchronous: the
// workers' steps interleave, each on the weights it read.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_PARAMETER_SERVER_TRAINING_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_PARAMETER_SERVER_TRAINING_H_

#include <chorus/parameter_server/parameter_server_strategy.h>

#include <functional>
#include <string>
#include <vector>

#include "image_set.h"
#include "trainer.h"

namespace fashion_mnist {

// The cluster part of a parameter-server job's identity (chorus::JobIdentity::cluster): "2 workers
// and 2 ps tasks (parameter servers)".
std::string ParameterServerCluster(const chorus::ParameterServerStrategy& strategy);

// Registers the functions every task of the job runs (the train step, the per-worker dataset),
// then serves when this process is a worker or ps task: returns true when it did (exit then).
// `load_train` gives the train set, `options` the batch and seed (the same flags in every role).
bool ServeParameterServerTasks(const std::function<ImageSet()>& load_train,
                               const TrainerOptions& options);

// On the chief: trains options.epochs epochs of train.size() / global batch steps each,
// evaluating the weights on `test` after each and saving ckpt-<epoch> every 2 epochs and after
// the last (whole tensors: it restores into a model with no strategy) through a
// chorus::CheckpointManager of the job's identity (the seed, the variables, the numbers of
// workers and ps tasks): another job's directory is refused unless
// options.take_over_checkpoint_dir. With options.resume it starts from the latest whole
// checkpoint there.
std::vector<EpochResult> FitWithParameterServers(
    const TrainAndTest& data, const TrainerOptions& options,
    const std::function<void(const EpochResult&)>& on_epoch);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_PARAMETER_SERVER_TRAINING_H_
