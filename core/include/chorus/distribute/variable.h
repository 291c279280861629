// Variables with tf.distribute's synchronization and aggregation. A Variable is a handle: copies
// share the same variable. Created inside a strategy's scope it is distributed the way that
// strategy distributes variables (one copy per replica device for Mirrored, one on the parameter
// device for CentralStorage, ...); created outside any scope it is a plain variable on CPU:0.
#ifndef CHORUS_VARIABLE_H_
#define CHORUS_VARIABLE_H_

#include <chorus/runtime/tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus {

class Strategy;

enum class VariableSynchronization { kAuto, kOnWrite, kOnRead, kNone };
enum class VariableAggregation { kNone, kSum, kMean, kOnlyFirstReplica };

const char* SynchronizationName(VariableSynchronization s);
const char* AggregationName(VariableAggregation a);

struct VariableSpec {
  std::string name;
  bool trainable = true;
  VariableSynchronization synchronization = VariableSynchronization::kAuto;
  VariableAggregation aggregation = VariableAggregation::kNone;
};

class VariableImpl;

class Variable {
 public:
  Variable() = default;
  // Creates a variable in the current strategy's scope (or a plain one outside every scope),
  // initialised from `initial` (host values, any device). Throws Error on a bad spec (e.g. a
  // trainable ON_READ variable).
  static Variable Create(const VariableSpec& spec, const Tensor& initial);
  static Variable Create(const VariableSpec& spec, const Shape& shape,
                         const std::vector<float>& initial);
  // A variable placed like `with` (same strategy, same devices, same kind of copies), e.g. an
  // optimizer slot. `initial` is copied to every copy.
  static Variable CreateColocated(const Variable& with, const VariableSpec& spec,
                                  const Tensor& initial);

  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const;
  const Shape& shape() const;
  chorus_dtype dtype() const;
  bool trainable() const;
  VariableSynchronization synchronization() const;  // never kAuto: resolved at creation
  VariableAggregation aggregation() const;
  // The strategy whose scope created it; nullptr for a plain variable.
  Strategy* strategy() const;

  // The value as seen from the current context: in a replica, that replica's copy (a SyncOnRead
  // variable's local value); in cross-replica context, the primary copy (SyncOnRead: the
  // aggregate across replicas; aggregation NONE is an error there).
  Tensor value() const;
  // Writes with tf.distribute's semantics for the current context (see variable.cc).
  void assign(const Tensor& value) const;
  void assign_add(const Tensor& delta) const;
  void assign_sub(const Tensor& delta) const;

  // Every copy, in the order of the devices that hold them.
  const std::vector<Tensor>& components() const;

  VariableImpl& impl() const;
  explicit Variable(std::shared_ptr<VariableImpl> impl) : impl_(std::move(impl)) {}
  bool operator==(const Variable& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<VariableImpl> impl_;
};

}  // namespace chorus

#endif  // CHORUS_VARIABLE_H_
