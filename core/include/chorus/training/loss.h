// Loss scaling for distributed training, as tf.nn.compute_average_loss and
// tf.nn.scale_regularization_loss.
#ifndef CHORUS_LOSS_H_
#define CHORUS_LOSS_H_

#include <cstdint>
#include <span>

namespace chorus {

// sum(per_example_loss * sample_weight) / global_batch_size. sample_weight empty means 1 for
// every example; otherwise it has one weight per example. global_batch_size 0 means
// per-replica batch size x num_replicas_in_sync of the current replica context (1 replica
// outside one), which is tf's default. Summed over replicas this gives the mean over the global
// batch. Throws Error on a size mismatch, a negative global_batch_size, or a call in
// cross-replica context (inside scope(), outside run()), as tf does.
float ComputeAverageLoss(std::span<const float> per_example_loss,
                         std::span<const float> sample_weight = {}, int64_t global_batch_size = 0);

// regularization_loss / num_replicas_in_sync (1 outside a replica context).
float ScaleRegularizationLoss(float regularization_loss);

}  // namespace chorus

#endif  // CHORUS_LOSS_H_
