// One training step of a replicated strategy (Mirrored, TPU), checked: replica r all-reduces a
// tensor of r + 1 in replica context and applies the gradient (r + 1, r + 1, r + 1) with
// SGD(0.5) to a mirrored variable; every result and every copy of the variable must be on a
// device of `platform` and hold the summed values.
#ifndef CHORUS_TESTS_SUPPORT_REPLICATED_STEP_CHECK_H_
#define CHORUS_TESTS_SUPPORT_REPLICATED_STEP_CHECK_H_

#include <chorus/chorus.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus::test {

inline void CheckAllReduceAndSgdStep(Strategy& strategy, const std::string& platform) {
  const int n = strategy.num_replicas_in_sync();
  for (const Device& device : strategy.devices()) {
    EXPECT_EQ(device.enumerator->platform(), platform);
  }
  const float sum = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
  Variable w;
  {
    auto scope = strategy.scope();
    VariableSpec spec;
    spec.name = "w";
    w = Variable::Create(spec, {3}, {1, 2, 3});
  }
  SGD sgd(0.5f);
  strategy.run([&](ReplicaContext& ctx) {
    const float id = static_cast<float>(ctx.replica_id_in_sync_group() + 1);
    const Tensor mine = Tensor::FromVector(ctx.device(), {1001}, std::vector<float>(1001, id));
    const Tensor total = ctx.all_reduce(CHORUS_REDUCE_SUM, mine);
    EXPECT_EQ(total.device(), ctx.device());
    EXPECT_EQ(total.ToVector(), std::vector<float>(1001, sum));
    // The step subtracts 0.5 * sum from every weight.
    sgd.apply_gradients({{Tensor::FromVector(ctx.device(), {3}, {id, id, id}), w}});
  });
  ASSERT_EQ(w.components().size(), static_cast<size_t>(n));
  for (const Tensor& copy : w.components()) {
    EXPECT_EQ(copy.device().enumerator->platform(), platform);
    EXPECT_EQ(copy.ToVector(),
              (std::vector<float>{1 - 0.5f * sum, 2 - 0.5f * sum, 3 - 0.5f * sum}));
  }
}

}  // namespace chorus::test

#endif  // CHORUS_TESTS_SUPPORT_REPLICATED_STEP_CHECK_H_
