// Keras' model.fit under ParameterServerStrategy: the chief schedules every training step on a
// worker through the ClusterCoordinator; the worker reads the ps tasks' current weights into its
// own copy of the model, runs the model's TrainStep on its next batch, and sends the gradients to
// the ps tasks' optimizer (asynchronous training: a step sees the weights of its moment). Nothing
// is shipped as code: every role registers the same model factory and training data by name.
#ifndef CHORUS_PARAMETER_SERVER_FIT_H_
#define CHORUS_PARAMETER_SERVER_FIT_H_

#include <chorus/parameter_server/cluster_coordinator.h>
#include <chorus/parameter_server/functions.h>
#include <chorus/parameter_server/parameter_server_strategy.h>
#include <chorus/training/callbacks.h>
#include <chorus/training/fit.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

// Builds the model with plain variables (it is called outside every scope).
using ModelFactory = std::function<std::unique_ptr<TrainableModel>()>;

// In every role, before ServeIfServerTask: model `name`'s factory, and the training data of each
// worker (a batched dataset per input pipeline; one step is one of its batches). An Error when
// the name is registered twice.
void RegisterFitModel(const std::string& name, ModelFactory factory, DatasetFunction train_data);

struct ParameterServerFitOptions {
  int epochs = 1;
  // Steps scheduled per epoch; required, as Keras requires it with ParameterServerStrategy (the
  // chief does not see the workers' data).
  int64_t steps_per_epoch = 0;
  // Evaluated on the chief after every epoch with the ps tasks' weights, in batches of
  // validation_batch_size (unbatched examples).
  const Dataset* validation_data = nullptr;
  int64_t validation_batch_size = 64;
  // ProgressBar, ModelCheckpoint (the weights: the optimizer's state lives on the ps tasks) and
  // EpochEndCallback; BackupAndRestore is refused (ShardedCheckpoint saves the ps tasks' state
  // with the optimizer's slots and step; restart the ps tasks and the chief from it).
  std::vector<Callback*> callbacks;
};

// Trains model `name` (see RegisterFitModel) on the coordinator's workers and its strategy's ps
// tasks: creates the model's variables there, by name, initialised from a model the factory
// builds here and sharded by the strategy's partitioner (a later fit of the same model goes on
// from the variables it finds), and schedules options.steps_per_epoch steps per epoch. Give the
// strategy its ServerOptimizer first. The epoch's loss is the mean of the steps' losses (each on
// one worker's batch, regularisation included); its accuracy counts every step's examples. The
// chief's copy of the model holds the ps tasks' weights after every epoch (callbacks see it);
// `trained_model`, when not null, receives it at the end.
History FitWithParameterServers(ClusterCoordinator& coordinator, const std::string& name,
                                const ParameterServerFitOptions& options,
                                std::unique_ptr<TrainableModel>* trained_model = nullptr);

}  // namespace chorus

#endif  // CHORUS_PARAMETER_SERVER_FIT_H_
