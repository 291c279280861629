// Optimizers (Keras semantics): SGD with momentum, and Adam. In a replica context,
// apply_gradients sums the gradients across replicas with one fused batch reduce (packed by
// CommunicationOptions.bytes_per_pack), then updates every copy of every variable identically.
#ifndef CHORUS_OPTIMIZER_H_
#define CHORUS_OPTIMIZER_H_

#include <chorus/collective/communication_options.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/variable.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

using GradientsAndVariables = std::vector<std::pair<Tensor, Variable>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Gradients are this replica's (replica context) or final (cross-replica / no strategy).
  void apply_gradients(const GradientsAndVariables& grads_and_vars,
                       const CommunicationOptions& options = {});

  // Creates the slots of these variables now (Keras' build); apply_gradients and
  // Checkpoint::Restore call it for variables that have none. Cross-replica context only.
  void build(const std::vector<Variable>& variables);

  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t iterations) { iterations_ = iterations; }

  // Slot variables by "<variable name>/<slot name>", for checkpoints.
  const std::map<std::string, Variable>& slots() const { return slots_; }
  virtual std::vector<std::string> slot_names() const = 0;

 protected:
  // Updates one copy of a variable with the (reduced) gradient on that copy's device; `slots`
  // are the same copy's slots in slot_names() order. `step` counts from 1.
  virtual void UpdateComponent(const Tensor& variable, const Tensor& gradient,
                               const std::vector<Tensor>& slots, int64_t step) = 0;

 private:
  void CreateSlots(const Variable& variable);
  // Whether each replica can update its own copy of every variable (mirrored variables whose
  // slots exist) instead of one thread updating all copies in a merge_call.
  bool UpdatesInReplicas(const GradientsAndVariables& grads_and_vars,
                         const ReplicaContext& context) const;
  void ApplyReduced(const std::vector<std::pair<std::vector<Tensor>, Variable>>& gradients);

  std::map<std::string, Variable> slots_;
  int64_t iterations_ = 0;
};

class SGD : public Optimizer {
 public:
  explicit SGD(float learning_rate = 0.01f, float momentum = 0.0f, bool nesterov = false);
  std::vector<std::string> slot_names() const override;

 protected:
  void UpdateComponent(const Tensor& variable, const Tensor& gradient,
                       const std::vector<Tensor>& slots, int64_t step) override;

 private:
  float learning_rate_, momentum_;
  bool nesterov_;
};

class Adam : public Optimizer {
 public:
  explicit Adam(float learning_rate = 0.001f, float beta_1 = 0.9f, float beta_2 = 0.999f,
                float epsilon = 1e-7f);
  std::vector<std::string> slot_names() const override;

 protected:
  void UpdateComponent(const Tensor& variable, const Tensor& gradient,
                       const std::vector<Tensor>& slots, int64_t step) override;

 private:
  float learning_rate_, beta_1_, beta_2_, epsilon_;
};

}  // namespace chorus

#endif  // CHORUS_OPTIMIZER_H_
