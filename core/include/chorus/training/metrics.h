// Keras-style metrics that distribute themselves: each keeps its state in a SyncOnRead variable
// (aggregation SUM) created in the current strategy's scope, so update_state inside run() adds to
// the replica's own copy without any communication, and result() in cross-replica context sums
// the copies of every replica and every worker (tf.keras.metrics.Mean,
// SparseCategoricalAccuracy). Outside every scope the state is a plain variable.
#ifndef CHORUS_METRICS_H_
#define CHORUS_METRICS_H_

#include <chorus/distribute/variable.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace chorus {

class Metric {
 public:
  virtual ~Metric() = default;
  const std::string& name() const { return name_; }
  // total / count over every replica and worker since the last reset (0 when count is 0).
  // Cross-replica context, or no strategy; with several workers every worker must call it
  // (it is a collective), as in TensorFlow.
  double result() const;
  // The summed [total, count] behind result(), read the same way.
  std::pair<double, double> totals() const;
  // Sets every copy to zero. Cross-replica context, or no strategy.
  void reset_state() const;
  // The state, [total, count], for checkpoints.
  const Variable& variable() const { return state_; }

 protected:
  explicit Metric(std::string name);
  // Adds to this replica's copy (or the only one).
  void Add(double total, double count) const;

 private:
  std::string name_;
  Variable state_;
};

// The mean of the values given to update_state (tf.keras.metrics.Mean).
class Mean : public Metric {
 public:
  explicit Mean(std::string name = "mean") : Metric(std::move(name)) {}
  // Adds sum(values * weights) to the total and sum(weights) to the count; no weights: 1 each.
  void update_state(std::span<const float> values, std::span<const float> sample_weight = {}) const;
  // Adds `total` and `count` directly (a value already summed, or a count of 0 for a replica
  // whose value another replica counts).
  void update_totals(double total, double count) const { Add(total, count); }
};

// The fraction of examples whose largest logit is at the label
// (tf.keras.metrics.SparseCategoricalAccuracy; ties go to the lowest class, as argmax does).
class SparseCategoricalAccuracy : public Metric {
 public:
  explicit SparseCategoricalAccuracy(std::string name = "accuracy") : Metric(std::move(name)) {}
  // labels: n classes; logits (or probabilities): n x num_classes, row after row.
  void update_state(std::span<const int32_t> labels, std::span<const float> logits,
                    int64_t num_classes) const;
};

// Examples whose largest logit is at the label (ties: the lowest class); the count behind
// SparseCategoricalAccuracy. labels: n classes; logits: n x num_classes. Error on a size mismatch.
int64_t CountCorrect(std::span<const int32_t> labels, std::span<const float> logits,
                     int64_t num_classes);

}  // namespace chorus

#endif  // CHORUS_METRICS_H_
