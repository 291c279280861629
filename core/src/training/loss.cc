#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/training/loss.h>

#include <string>

namespace chorus {
namespace {

// tf raises when these are called in cross-replica context: a strategy is current but the
// caller is outside its replica function, so the replica count to scale by is ambiguous.
int NumReplicasInSync(const char* what) {
  if (InCrossReplicaContext()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                std::string(what) +
                    " was called in cross-replica context; call it in the replica function "
                    "passed to Strategy::run");
  }
  const ReplicaContext* context = CurrentReplicaContext();
  return context ? context->num_replicas_in_sync() : 1;
}

}  // namespace

float ComputeAverageLoss(std::span<const float> per_example_loss,
                         std::span<const float> sample_weight, int64_t global_batch_size) {
  if (!sample_weight.empty() && sample_weight.size() != per_example_loss.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "ComputeAverageLoss: sample_weight has " + std::to_string(sample_weight.size()) +
                    " weights but per_example_loss has " + std::to_string(per_example_loss.size()) +
                    " losses; pass one weight per example, or none");
  }
  if (global_batch_size < 0) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "ComputeAverageLoss: global_batch_size is " + std::to_string(global_batch_size) +
                    "; pass the global batch size, or 0 for per-replica size x replicas");
  }
  const int replicas = NumReplicasInSync("ComputeAverageLoss");
  if (global_batch_size == 0) {
    global_batch_size = static_cast<int64_t>(per_example_loss.size()) * replicas;
  }
  if (global_batch_size == 0) return 0.0f;  // an empty batch contributes nothing, not NaN
  double sum = 0.0;
  for (size_t i = 0; i < per_example_loss.size(); ++i) {
    const double weight = sample_weight.empty() ? 1.0 : sample_weight[i];
    sum += static_cast<double>(per_example_loss[i]) * weight;
  }
  return static_cast<float>(sum / static_cast<double>(global_batch_size));
}

float ScaleRegularizationLoss(float regularization_loss) {
  const int replicas = NumReplicasInSync("ScaleRegularizationLoss");
  return static_cast<float>(static_cast<double>(regularization_loss) / replicas);
}

}  // namespace chorus
