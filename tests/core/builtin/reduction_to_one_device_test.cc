// ReductionToOneDevice through chorus::CrossDeviceOps, Gloo-style: parameterised over element
// counts 0, 1, odd and large and over replica counts.
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace chorus {
namespace {

const Registry& BareRegistry() {
  static Registry registry([] {
    LoaderOptions options;
    options.filter = "none";
    return options;
  }());
  return registry;
}

struct Replicas {
  std::shared_ptr<DeviceEnumerator> cpu;
  std::vector<Device> devices;
  std::vector<DeviceBuffer> buffers;
  Replicas(size_t n, size_t count) {
    cpu =
        DeviceEnumerator::Create(BareRegistry().FindPlugin("core"), {{"count", std::to_string(n)}});
    for (uint32_t i = 0; i < n; ++i) {
      devices.push_back({cpu, i});
      buffers.emplace_back(devices.back(), count * sizeof(float));
    }
  }
  std::vector<chorus_buffer> Views() const {
    std::vector<chorus_buffer> views;
    for (const auto& b : buffers) views.push_back(b.buffer());
    return views;
  }
};

class ReductionToOneDeviceSweep : public ::testing::TestWithParam<std::tuple<size_t, size_t>> {};

TEST_P(ReductionToOneDeviceSweep, AllReduceSumMeanMaxAndBroadcast) {
  const size_t n = std::get<0>(GetParam());
  const size_t count = std::get<1>(GetParam());
  Replicas r(n, count);
  auto ops = CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices);
  auto fill = [&] {
    for (size_t d = 0; d < n; ++d) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((d + 1) * (i % 7));
      r.buffers[d].CopyFromHost(v.data(), count * sizeof(float));
    }
  };
  const float replica_sum = static_cast<float>(n * (n + 1) / 2);
  for (chorus_reduce_op op : {CHORUS_REDUCE_SUM, CHORUS_REDUCE_MEAN, CHORUS_REDUCE_MAX}) {
    fill();
    ops->Reduce(op, {CHORUS_F32, count, r.Views(), r.Views()});  // in place: an all-reduce
    for (size_t d = 0; d < n; ++d) {
      std::vector<float> got(count);
      r.buffers[d].CopyToHost(got.data(), count * sizeof(float));
      for (size_t i = 0; i < count; ++i) {
        const float base = static_cast<float>(i % 7);
        const float want = op == CHORUS_REDUCE_SUM    ? base * replica_sum
                           : op == CHORUS_REDUCE_MEAN ? base * replica_sum / n
                                                      : base * n;
        ASSERT_EQ(got[i], want) << "op " << op << " device " << d << " element " << i;
      }
    }
  }
  // Broadcast device n-1's values everywhere.
  fill();
  ops->Broadcast(CHORUS_F32, count, r.buffers[n - 1].buffer(), r.Views());
  for (size_t d = 0; d < n; ++d) {
    std::vector<float> got(count);
    r.buffers[d].CopyToHost(got.data(), count * sizeof(float));
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], static_cast<float>(n * (i % 7)));
  }
}

INSTANTIATE_TEST_SUITE_P(CountsAndReplicas, ReductionToOneDeviceSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(0, 1, 1001, 262147)));

// The sum's association is fixed: a pairwise tree over the replicas in order, as hierarchical
// copy and a 2-level all-reduce sum 2^k replicas (chorus::FitOptions::gradient_shards relies on
// it). 1e8 + 1 rounds to 1e8 in f32, so each association of these values gives its own result.
TEST(ReductionToOneDevice, SumsReplicasPairwiseInReplicaOrder) {
  struct Case {
    std::vector<float> replicas;
    float want;
    const char* tree;
  };
  const std::vector<Case> cases = {
      {{1e8f, 1, -1e8f, 1}, 0.0f, "(r0 + r1) + (r2 + r3); a running sum gives 1"},
      {{1e8f, 1, -1e8f, 1, 1}, 1.0f, "((r0 + r1) + (r2 + r3)) + r4; a running sum gives 2"},
      {{1e8f, 1, -1e8f, 1, 1, 1},
       2.0f,
       "((r0 + r1) + (r2 + r3)) + (r4 + r5); a running sum gives 3"},
      {{1e8f, 1, -1e8f, 1, 1e8f, 1, -1e8f, 1}, 0.0f, "three levels; a running sum gives 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tree);
    const size_t n = c.replicas.size(), count = 3;
    Replicas r(n, count);
    auto ops = CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices);
    for (size_t d = 0; d < n; ++d) {
      const std::vector<float> v(count, c.replicas[d]);
      r.buffers[d].CopyFromHost(v.data(), count * sizeof(float));
    }
    ops->Reduce(CHORUS_REDUCE_SUM, {CHORUS_F32, count, r.Views(), r.Views()});
    for (size_t d = 0; d < n; ++d) {
      std::vector<float> got(count);
      r.buffers[d].CopyToHost(got.data(), count * sizeof(float));
      EXPECT_EQ(got, std::vector<float>(count, c.want)) << "device " << d;
    }
  }
}

TEST(ReductionToOneDevice, ReduceToDeviceOptionPicksTheAccumulator) {
  Replicas r(3, 4);
  auto ops = CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices,
                                    {{"reduce_to_device", "2"}});
  for (size_t d = 0; d < 3; ++d) {
    std::vector<float> v(4, static_cast<float>(d));
    r.buffers[d].CopyFromHost(v.data(), 16);
  }
  DeviceBuffer out(r.devices[0], 16);
  ops->Reduce(CHORUS_REDUCE_SUM, {CHORUS_F32, 4, r.Views(), {out.buffer()}});
  std::vector<float> got(4);
  out.CopyToHost(got.data(), 16);
  EXPECT_EQ(got, std::vector<float>(4, 3.0f));
}

TEST(ReductionToOneDevice, AReduceToDeviceThatDoesNotExistIsAnError) {
  Replicas r(2, 1);
  try {
    CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices,
                           {{"reduce_to_device", "9"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_to_device=9 does not exist"), std::string::npos)
        << e.what();
  }
}

TEST(ReductionToOneDevice, BatchReduceAndUnevenAllGather) {
  Replicas r(3, 5);
  auto ops = CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices);
  std::vector<std::vector<int32_t>> a{{1, 2}, {3, 4}, {5, 6}};
  std::vector<std::vector<int32_t>> b{{1}, {10}, {100}};
  std::vector<ReduceSpec> specs(2);
  specs[0].dtype = specs[1].dtype = CHORUS_I32;
  specs[0].count = 2;
  specs[1].count = 1;
  for (size_t d = 0; d < 3; ++d) {
    specs[0].inputs.push_back({r.devices[d].index, a[d].data()});
    specs[1].inputs.push_back({r.devices[d].index, b[d].data()});
  }
  specs[0].outputs = specs[0].inputs;
  specs[1].outputs = specs[1].inputs;
  ops->BatchReduce(CHORUS_REDUCE_MEAN, specs);
  for (size_t d = 0; d < 3; ++d) {
    EXPECT_EQ(a[d], (std::vector<int32_t>{3, 4}));
    EXPECT_EQ(b[d], (std::vector<int32_t>{37}));  // 111 / 3
  }
  std::vector<int32_t> x{1}, y{2, 3}, z{}, out(3, -1);
  ops->AllGather(CHORUS_I32, {{0, x.data()}, {1, y.data()}, {2, z.data()}}, {1, 2, 0},
                 {{0, out.data()}});
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3}));
}

// Cross-device ops without a reduce_scatter of their own (the core's): the core reduces into a
// scratch buffer and copies each replica's part, for 1 to 4 replicas and sizes 0, 1 and odd;
// MEAN divides by the replicas; inputs and outputs that do not pair up are refused.
TEST(ReductionToOneDevice, ReduceScatterGivesEachReplicaItsPartOfTheReduction) {
  for (size_t n : {1, 2, 3, 4}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{37}}) {
      SCOPED_TRACE(std::to_string(n) + " replicas, " + std::to_string(count) + " per part");
      Replicas r(n, 1);
      auto ops = CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices);
      std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count * n));
      std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(count, -1));
      std::vector<chorus_buffer> ins, outs;
      for (size_t d = 0; d < n; ++d) {
        for (size_t k = 0; k < count * n; ++k) in[d][k] = static_cast<int32_t>(k * 10 + d);
        ins.push_back({r.devices[d].index, in[d].data()});
        outs.push_back({r.devices[d].index, out[d].data()});
      }
      ops->ReduceScatter(CHORUS_REDUCE_SUM, CHORUS_I32, count, ins, outs);
      for (size_t j = 0; j < n; ++j) {
        for (size_t k = 0; k < count; ++k) {
          const size_t at = j * count + k;  // element of the whole reduction
          EXPECT_EQ(out[j][k], static_cast<int32_t>(at * 10 * n + n * (n - 1) / 2)) << j << k;
        }
      }
      ops->ReduceScatter(CHORUS_REDUCE_MEAN, CHORUS_I32, count, ins, outs);
      for (size_t j = 0; j < n; ++j) {
        for (size_t k = 0; k < count; ++k) {
          const size_t at = j * count + k;
          EXPECT_EQ(out[j][k], static_cast<int32_t>((at * 10 * n + n * (n - 1) / 2) / n));
        }
      }
    }
  }
  Replicas r(2, 4);
  auto ops = CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices);
  try {
    ops->ReduceScatter(CHORUS_REDUCE_SUM, CHORUS_F32, 1, r.Views(), {r.Views()[0]});
    FAIL() << "two inputs, one output";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("one input and one output per replica"), std::string::npos)
        << e.what();
  }
}

TEST(ReductionToOneDevice, MismatchedArgumentsGiveTheKernelsMessage) {
  Replicas r(2, 1);
  auto ops = CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", r.devices);
  try {
    ops->Reduce(CHORUS_REDUCE_SUM, {CHORUS_F32, 1, {{7, r.buffers[0].data()}}, r.Views()});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("device 7 does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops->Reduce(static_cast<chorus_reduce_op>(9), {CHORUS_F32, 1, r.Views(), r.Views()}),
               Error);
}

TEST(ReductionToOneDevice, NeedsAtLeastOneDevice) {
  EXPECT_THROW(CrossDeviceOps::Create(BareRegistry(), "reduction_to_one_device", {}), Error);
}

}  // namespace
}  // namespace chorus
