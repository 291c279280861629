#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/metrics.h>

#include <algorithm>
#include <string>
#include <vector>

namespace chorus {
namespace {

void RequireCrossReplica(const std::string& metric, const char* what) {
  if (CurrentReplicaContext() != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT, "metric '" + metric + "': " + what +
                                             " is called in cross-replica context (outside "
                                             "run()), not inside a replica function");
  }
}

Device StateDevice(const Variable& state) {
  const ReplicaContext* context = CurrentReplicaContext();
  if (context != nullptr) return context->device();
  return state.components().front().device();
}

}  // namespace

Metric::Metric(std::string name) : name_(std::move(name)) {
  if (CurrentReplicaContext() != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "metric '" + name_ +
                    "' is created inside a replica function; create metrics in "
                    "strategy.scope() (cross-replica context), as their variables are");
  }
  VariableSpec spec;
  spec.name = name_ + "/total_count";
  spec.trainable = false;
  spec.synchronization = VariableSynchronization::kOnRead;
  spec.aggregation = VariableAggregation::kSum;
  state_ = Variable::Create(spec, {2}, {0.0f, 0.0f});
}

std::pair<double, double> Metric::totals() const {
  RequireCrossReplica(name_, "result()");
  const std::vector<float> values = state_.value().ToVector();
  return {values[0], values[1]};
}

double Metric::result() const {
  const auto [total, count] = totals();
  return count != 0 ? total / count : 0.0;
}

void Metric::reset_state() const {
  RequireCrossReplica(name_, "reset_state()");
  state_.assign(Tensor::FromVector(StateDevice(state_), {2}, {0.0f, 0.0f}));
}

void Metric::Add(double total, double count) const {
  state_.assign_add(Tensor::FromVector(StateDevice(state_), {2},
                                       {static_cast<float>(total), static_cast<float>(count)}));
}

void Mean::update_state(std::span<const float> values, std::span<const float> sample_weight) const {
  if (!sample_weight.empty() && sample_weight.size() != values.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "metric '" + name() +
                                             "': " + std::to_string(values.size()) +
                                             " values but " + std::to_string(sample_weight.size()) +
                                             " sample weights; give one weight per value or none");
  }
  double total = 0, count = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double weight = sample_weight.empty() ? 1.0 : sample_weight[i];
    total += weight * values[i];
    count += weight;
  }
  Add(total, count);
}

int64_t CountCorrect(std::span<const int32_t> labels, std::span<const float> logits,
                     int64_t num_classes) {
  if (num_classes <= 0 || logits.size() != labels.size() * static_cast<size_t>(num_classes)) {
    throw Error(
        CHORUS_INVALID_ARGUMENT,
        std::to_string(labels.size()) + " labels of " + std::to_string(num_classes) +
            " classes need " +
            std::to_string(labels.size() * static_cast<size_t>(std::max<int64_t>(num_classes, 0))) +
            " logits, got " + std::to_string(logits.size()));
  }
  int64_t correct = 0;
  const auto classes = static_cast<size_t>(num_classes);
  for (size_t i = 0; i < labels.size(); ++i) {
    const float* row = logits.data() + i * classes;
    size_t best = 0;
    for (size_t c = 1; c < classes; ++c) {
      if (row[c] > row[best]) best = c;
    }
    correct += static_cast<int64_t>(best) == labels[i] ? 1 : 0;
  }
  return correct;
}

void SparseCategoricalAccuracy::update_state(std::span<const int32_t> labels,
                                             std::span<const float> logits,
                                             int64_t num_classes) const {
  int64_t correct = 0;
  try {
    correct = CountCorrect(labels, logits, num_classes);
  } catch (const Error& e) {
    throw Error(e.status(), "metric '" + name() + "': " + e.what());
  }
  Add(static_cast<double>(correct), static_cast<double>(labels.size()));
}

}  // namespace chorus
