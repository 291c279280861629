// Variables and tf.distribute's rules for reading and writing them:
//
//   kind        read, replica ctx    read, cross-replica    write, replica ctx          write,
//   cross-replica plain       the copy             the copy               error (use a strategy)
//   the copy mirrored    replica's copy       copy 0                 merge: aggregate, all copies
//   all copies central     the copy             the copy               merge: aggregate, the copy
//   the copy syncOnRead  replica's copy       aggregate of copies    replica's copy all copies
//   (SUM: value/n)
//
// "aggregate" follows the variable's aggregation: SUM, MEAN, ONLY_FIRST_REPLICA (replica 0's
// value); NONE is an error where an aggregate is needed, as in tf.distribute.
#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/strategy.h>
#include <chorus/distribute/variable.h>

namespace chorus {

class VariableImpl {
 public:
  VariableSpec spec;
  Shape shape;
  chorus_dtype dtype = CHORUS_F32;
  VariableKind kind = VariableKind::kPlain;
  Strategy* strategy = nullptr;
  std::vector<Tensor> components;
};

namespace {

thread_local const Variable* t_colocate_with = nullptr;

chorus_reduce_op AggregationOp(const Variable& v) {
  switch (v.aggregation()) {
    case VariableAggregation::kSum:
      return CHORUS_REDUCE_SUM;
    case VariableAggregation::kMean:
      return CHORUS_REDUCE_MEAN;
    default:
      throw Error(CHORUS_INTERNAL, "no reduce op for this aggregation");
  }
}

// Applies `delta` to `target` in place on the host: target = target + sign * delta (sign 0:
// plain assignment).
void Combine(const Tensor& target, const Tensor& delta, int sign) {
  if (delta.num_elements() != target.num_elements()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "value of shape " + ShapeString(delta.shape()) +
                                             " for a variable of shape " +
                                             ShapeString(target.shape()));
  }
  if (sign == 0) return target.Assign(delta);
  std::vector<float> t = target.ToVector();
  const std::vector<float> d = delta.ToVector();
  for (size_t i = 0; i < t.size(); ++i) t[i] += static_cast<float>(sign) * d[i];
  target.Assign(Tensor::FromVector(target.device(), target.shape(), t));
}

void RequireSameStrategy(const Variable& v, const ReplicaContext& ctx) {
  if (v.strategy() != &ctx.strategy()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "variable '" + v.name() + "' was created outside the scope of " +
                    ctx.strategy().name() +
                    "; create it inside strategy.scope(), before calling run()");
  }
}

// The value every copy gets from the replicas' values of a replica-context write.
Tensor Aggregate(const Variable& v, Strategy& strategy, const std::vector<Tensor>& values) {
  switch (v.aggregation()) {
    case VariableAggregation::kOnlyFirstReplica:
      return strategy.BroadcastFromLeader(values[0]);  // replica 0 of every replica in sync
    case VariableAggregation::kSum:
    case VariableAggregation::kMean:
      return strategy.reduce(AggregationOp(v), PerReplica(values));
    case VariableAggregation::kNone:
    default:
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "variable '" + v.name() +
                      "' is written in a replica context but its aggregation is NONE: give it "
                      "an aggregation (SUM, MEAN or ONLY_FIRST_REPLICA) so the replicas' values "
                      "can be combined, or write it in cross-replica context");
  }
}

void Write(const Variable& v, const Tensor& value, int sign) {
  VariableImpl& impl = v.impl();
  ReplicaContext* ctx = CurrentReplicaContext();
  if (ctx == nullptr) {  // cross-replica, or no strategy
    if (impl.kind == VariableKind::kSyncOnRead && sign != 0 &&
        v.aggregation() == VariableAggregation::kSum) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "SyncOnRead variable '" + v.name() +
                      "' with SUM aggregation cannot be assign_add/assign_sub'ed in cross-replica "
                      "context (the change could not be split across replicas); use assign");
    }
    Tensor shared = value;
    if (impl.kind == VariableKind::kSyncOnRead && v.aggregation() == VariableAggregation::kSum) {
      std::vector<float> split = value.ToVector();
      const int replicas = impl.strategy != nullptr ? impl.strategy->num_replicas_in_sync()
                                                    : static_cast<int>(impl.components.size());
      for (float& x : split) x /= static_cast<float>(replicas);
      shared = Tensor::FromVector(value.device(), value.shape(), split);
    }
    for (const Tensor& copy : impl.components) Combine(copy, shared, sign);
    return;
  }
  RequireSameStrategy(v, *ctx);
  switch (impl.kind) {
    case VariableKind::kSyncOnRead:
      Combine(impl.components[static_cast<size_t>(ctx->local_replica_id())], value, sign);
      return;
    case VariableKind::kMirrored:
    case VariableKind::kCentral: {
      const Tensor mine = value;
      ctx->merge_call<bool, Tensor>(
          [&](Strategy& strategy, const std::vector<Tensor>& values) {
            const Tensor combined = Aggregate(v, strategy, values);
            for (const Tensor& copy : impl.components) Combine(copy, combined, sign);
            return true;
          },
          mine);
      return;
    }
    case VariableKind::kPlain:
    default:
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "variable '" + v.name() + "' was created outside the scope of " +
                      ctx->strategy().name() + "; create it inside strategy.scope()");
  }
}

VariableSynchronization ResolveSynchronization(const VariableSpec& spec, Strategy* strategy) {
  if (spec.synchronization == VariableSynchronization::kAuto) {
    return VariableSynchronization::kOnWrite;
  }
  if (spec.synchronization == VariableSynchronization::kOnRead && spec.trainable) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "variable '" + spec.name +
                    "': synchronization ON_READ is only for non-trainable variables; set "
                    "trainable = false or use ON_WRITE");
  }
  if (spec.synchronization == VariableSynchronization::kNone && strategy != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT, "variable '" + spec.name +
                                             "': synchronization NONE is not supported under " +
                                             strategy->name() + "; use AUTO, ON_WRITE or ON_READ");
  }
  return spec.synchronization;
}

std::shared_ptr<VariableImpl> MakeImpl(const VariableSpec& spec, const Tensor& initial,
                                       Strategy* strategy, VariableKind kind,
                                       const std::vector<Device>& devices) {
  if (spec.name.empty()) throw Error(CHORUS_INVALID_ARGUMENT, "a variable needs a name");
  if (!initial.defined()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "variable '" + spec.name + "': initial value is undefined");
  }
  auto impl = std::make_shared<VariableImpl>();
  impl->spec = spec;
  impl->spec.synchronization = ResolveSynchronization(spec, strategy);
  impl->shape = initial.shape();
  impl->dtype = initial.dtype();
  impl->kind = kind;
  impl->strategy = strategy;
  // Multi-worker: every worker starts from the leader's value (tf's initial broadcast).
  const Tensor start = strategy != nullptr ? strategy->BroadcastFromLeader(initial) : initial;
  for (const Device& device : devices) impl->components.push_back(start.CopyTo(device));
  return impl;
}

}  // namespace

const char* SynchronizationName(VariableSynchronization s) {
  switch (s) {
    case VariableSynchronization::kAuto:
      return "AUTO";
    case VariableSynchronization::kOnWrite:
      return "ON_WRITE";
    case VariableSynchronization::kOnRead:
      return "ON_READ";
    case VariableSynchronization::kNone:
      return "NONE";
  }
  return "?";
}

const char* AggregationName(VariableAggregation a) {
  switch (a) {
    case VariableAggregation::kNone:
      return "NONE";
    case VariableAggregation::kSum:
      return "SUM";
    case VariableAggregation::kMean:
      return "MEAN";
    case VariableAggregation::kOnlyFirstReplica:
      return "ONLY_FIRST_REPLICA";
  }
  return "?";
}

Variable Variable::Create(const VariableSpec& spec, const Tensor& initial) {
  if (t_colocate_with != nullptr) return CreateColocated(*t_colocate_with, spec, initial);
  if (CurrentReplicaContext() != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "variable '" + spec.name +
                    "' is created inside a replica function; create variables in "
                    "strategy.scope(), outside run()");
  }
  Strategy* strategy = CurrentStrategy();
  if (strategy == nullptr) {
    ResolveSynchronization(spec, nullptr);
    const Device cpu0{Registry::Global().CpuDevices(), 0};
    return Variable(MakeImpl(spec, initial, nullptr, VariableKind::kPlain, {cpu0}));
  }
  const VariableKind kind = strategy->PlacementFor(ResolveSynchronization(spec, strategy));
  return Variable(MakeImpl(spec, initial, strategy, kind, strategy->DevicesFor(kind)));
}

Variable Variable::Create(const VariableSpec& spec, const Shape& shape,
                          const std::vector<float>& initial) {
  const Device cpu0{Registry::Global().CpuDevices(), 0};
  return Create(spec, Tensor::FromVector(cpu0, shape, initial));
}

Variable Variable::CreateColocated(const Variable& with, const VariableSpec& spec,
                                   const Tensor& initial) {
  const VariableImpl& other = with.impl();
  std::vector<Device> devices;
  for (const Tensor& copy : other.components) devices.push_back(copy.device());
  return Variable(MakeImpl(spec, initial, other.strategy, other.kind, devices));
}

VariableImpl& Variable::impl() const {
  if (!impl_) throw Error(CHORUS_INVALID_ARGUMENT, "use of an undefined variable");
  return *impl_;
}

const std::string& Variable::name() const { return impl().spec.name; }
const Shape& Variable::shape() const { return impl().shape; }
chorus_dtype Variable::dtype() const { return impl().dtype; }
bool Variable::trainable() const { return impl().spec.trainable; }
VariableSynchronization Variable::synchronization() const { return impl().spec.synchronization; }
VariableAggregation Variable::aggregation() const { return impl().spec.aggregation; }
Strategy* Variable::strategy() const { return impl().strategy; }
const std::vector<Tensor>& Variable::components() const { return impl().components; }

Tensor Variable::value() const {
  const VariableImpl& self = impl();
  ReplicaContext* ctx = CurrentReplicaContext();
  if (ctx != nullptr) {
    RequireSameStrategy(*this, *ctx);
    if (self.components.size() == 1) return self.components[0];
    return self.components[static_cast<size_t>(ctx->local_replica_id())];
  }
  if (self.kind != VariableKind::kSyncOnRead) return self.components[0];
  switch (aggregation()) {
    case VariableAggregation::kOnlyFirstReplica:
      return self.strategy->BroadcastFromLeader(self.components[0]);
    case VariableAggregation::kSum:
    case VariableAggregation::kMean:
      return self.strategy->reduce(AggregationOp(*this), PerReplica(self.components));
    case VariableAggregation::kNone:
    default:
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "SyncOnRead variable '" + name() +
                      "' is read in cross-replica context but its aggregation is NONE: give it "
                      "SUM, MEAN or ONLY_FIRST_REPLICA, or read it inside run()");
  }
}

void Variable::assign(const Tensor& value) const { Write(*this, value, 0); }
void Variable::assign_add(const Tensor& delta) const { Write(*this, delta, 1); }
void Variable::assign_sub(const Tensor& delta) const { Write(*this, delta, -1); }

std::shared_ptr<void> StrategyExtended::colocate_vars_with(const Variable& variable) const {
  if (!variable_created_in_scope(variable)) {
    throw Error(CHORUS_INVALID_ARGUMENT, "colocate_vars_with: variable '" + variable.name() +
                                             "' was not created in the scope of " +
                                             strategy_.name());
  }
  struct Guard {
    const Variable* saved;
    Variable target;
    ~Guard() { t_colocate_with = saved; }
  };
  auto guard = std::make_shared<Guard>(Guard{t_colocate_with, variable});
  t_colocate_with = &guard->target;
  return guard;
}

}  // namespace chorus
