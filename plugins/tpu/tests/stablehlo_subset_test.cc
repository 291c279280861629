// The reference PJRT plugin's StableHLO interpreter on its own: each op of its subset against
// hand-computed values, calls between functions, the refusals, and a user's softmax regression
// step (examples/fashion_mnist/softmax_regression_step.mlir) over replicas, alone and inside the
// module chorus's tpu plugin wraps such a step in.
#include "stablehlo_subset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "stablehlo_programs.h"

// Not in chorus::pjrt::reference_plugin: a unity build puts this file and the interpreter's in
// one translation unit, whose helpers would clash with these.
namespace chorus_stablehlo_subset_test {
namespace {

using chorus::pjrt::reference_plugin::CompileOptions;
using chorus::pjrt::reference_plugin::HostTensor;
using chorus::pjrt::reference_plugin::ReadCompileOptions;
using chorus::pjrt::reference_plugin::SubsetProgram;
using chorus::pjrt::reference_plugin::TensorType;
using ::testing::HasSubstr;
using Bytes = std::vector<unsigned char>;

template <typename T>
HostTensor Tensor(const std::string& element, std::vector<int64_t> dims,
                  const std::vector<T>& values) {
  auto bytes = std::make_shared<Bytes>(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes->data(), values.data(), bytes->size());
  return {TensorType{element, std::move(dims)}, bytes};
}

HostTensor F32(std::vector<int64_t> dims, const std::vector<float>& values) {
  return Tensor("f32", std::move(dims), values);
}

template <typename T>
std::vector<T> Values(const HostTensor& tensor) {
  std::vector<T> values(tensor.bytes->size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), tensor.bytes->data(), tensor.bytes->size());
  return values;
}

std::string Module(int replicas, const std::string& functions) {
  return "module @test attributes {mhlo.num_replicas = " + std::to_string(replicas) +
         " : i32, mhlo.num_partitions = 1 : i32} {\n" + functions + "}\n";
}

// A one-replica module whose @main takes `arguments` and returns `results` (signature text).
std::string Main(const std::string& arguments, const std::string& results,
                 const std::string& body) {
  return Module(
      1, "  func.func public @main(" + arguments + ") -> (" + results + ") {\n" + body + "  }\n");
}

std::vector<HostTensor> RunOne(const std::string& text, const std::vector<HostTensor>& arguments) {
  return SubsetProgram::Parse(text)->Run({arguments})[0];
}

// The message Parse refuses `text` with ("" when it does not).
std::string Refusal(const std::string& text) {
  try {
    SubsetProgram::Parse(text);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// ---- Ops.

TEST(StablehloSubset, DotGeneralContractsEitherDimensionOfEitherOperand) {
  // a [2, 3] and b [3, 4]; at and bt their transposes. Every combination gives a . b.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> at = {1, 4, 2, 5, 3, 6};
  const std::vector<float> b = {1, 0, 2, -1, 0, 1, 1, 2, 3, -2, 0, 1};
  const std::vector<float> bt = {1, 0, 3, 0, 1, -2, 2, 1, 0, -1, 2, 1};
  auto dot = [](const std::string& result, const std::string& lhs, const std::string& rhs, int lc,
                int rc, const std::string& lhs_type, const std::string& rhs_type) {
    return "    " + result + " = \"stablehlo.dot_general\"(" + lhs + ", " + rhs +
           ") {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [" +
           std::to_string(lc) + "], rhs_contracting_dimensions = [" + std::to_string(rc) +
           "]>} : (" + lhs_type + ", " + rhs_type + ") -> tensor<2x4xf32>\n";
  };
  const std::string A = "tensor<2x3xf32>", At = "tensor<3x2xf32>", B = "tensor<3x4xf32>",
                    Bt = "tensor<4x3xf32>", R = "tensor<2x4xf32>";
  const std::string text =
      Main("%a: " + A + ", %at: " + At + ", %b: " + B + ", %bt: " + Bt,
           R + ", " + R + ", " + R + ", " + R,
           dot("%p10", "%a", "%b", 1, 0, A, B) + dot("%p00", "%at", "%b", 0, 0, At, B) +
               dot("%p11", "%a", "%bt", 1, 1, A, Bt) + dot("%p01", "%at", "%bt", 0, 1, At, Bt) +
               "    \"func.return\"(%p10, %p00, %p11, %p01) : (" + R + ", " + R + ", " + R + ", " +
               R + ") -> ()\n");
  const std::vector<HostTensor> results =
      RunOne(text, {F32({2, 3}, a), F32({3, 2}, at), F32({3, 4}, b), F32({4, 3}, bt)});
  const std::vector<float> expected = {10, -4, 4, 6, 22, -7, 13, 12};
  ASSERT_EQ(results.size(), 4u);
  for (const HostTensor& result : results) {
    EXPECT_EQ(result.type.dims, (std::vector<int64_t>{2, 4}));
    EXPECT_EQ(Values<float>(result), expected);
  }
}

TEST(StablehloSubset, DotGeneralOfF64SumsInDouble) {
  const std::string text =
      Main("%x: tensor<1x2xf64>, %w: tensor<2x1xf64>", "tensor<1x1xf64>",
           "    %y = \"stablehlo.dot_general\"(%x, %w) {dot_dimension_numbers = "
           "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : "
           "(tensor<1x2xf64>, tensor<2x1xf64>) -> tensor<1x1xf64>\n"
           "    \"func.return\"(%y) : (tensor<1x1xf64>) -> ()\n");
  // 1 + 1e-10 is not a float; in double it is kept.
  const std::vector<HostTensor> results = RunOne(text, {Tensor<double>("f64", {1, 2}, {1.0, 1e-10}),
                                                        Tensor<double>("f64", {2, 1}, {1.0, 1.0})});
  EXPECT_EQ(Values<double>(results[0]), (std::vector<double>{0.0 + 1.0 * 1.0 + 1e-10 * 1.0}));
}

TEST(StablehloSubset, DotGeneralOutsideTheSubsetIsRefusedNamingTheLine) {
  const std::string batching =
      Main("%x: tensor<2x3xf32>, %w: tensor<3x4xf32>", "tensor<2x4xf32>",
           "    %y = \"stablehlo.dot_general\"(%x, %w) {dot_dimension_numbers = "
           "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
           "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : "
           "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>\n"
           "    \"func.return\"(%y) : (tensor<2x4xf32>) -> ()\n");
  EXPECT_THAT(Refusal(batching), HasSubstr("line 3 (%y = \"stablehlo.dot_general\""));
  EXPECT_THAT(Refusal(batching), HasSubstr("without batching dimensions"));
  std::string wrong_result = batching;
  ReplaceAll(wrong_result, "lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], ", "");
  ReplaceAll(wrong_result, "-> tensor<2x4xf32>\n    \"func", "-> tensor<4x2xf32>\n    \"func");
  EXPECT_THAT(Refusal(wrong_result), HasSubstr("line 3"));
  EXPECT_THAT(Refusal(wrong_result), HasSubstr("dot_general's result type is not tensor<2x4xf32>"));
}

// A module reducing %x (tensor<2x3xT>) with `combiner` from `init` over `dimensions`.
std::string ReduceProgram(const std::string& combiner, const std::string& dimensions,
                          const std::string& result, const std::string& init) {
  return Main("%x: tensor<2x3xf32>", result,
              "    %init = \"stablehlo.constant\"() {value = dense<" + init +
                  "> : tensor<f32>} : () -> tensor<f32>\n"
                  "    %r = \"stablehlo.reduce\"(%x, %init) ({\n"
                  "    ^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):\n"
                  "      %c = \"stablehlo." +
                  combiner +
                  "\"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
                  "      \"stablehlo.return\"(%c) : (tensor<f32>) -> ()\n"
                  "    }) {dimensions = array<i64" +
                  dimensions + ">} : (tensor<2x3xf32>, tensor<f32>) -> " + result +
                  "\n"
                  "    \"func.return\"(%r) : (" +
                  result + ") -> ()\n");
}

TEST(StablehloSubset, ReduceOverOneOrBothDimensions) {
  const HostTensor x = F32({2, 3}, {1, 5, 2, 7, 3, 4});
  auto reduce = [&](const std::string& combiner, const std::string& dimensions,
                    const std::string& result, const std::string& init) {
    return Values<float>(RunOne(ReduceProgram(combiner, dimensions, result, init), {x})[0]);
  };
  EXPECT_EQ(reduce("add", ": 0", "tensor<3xf32>", "0.0"), (std::vector<float>{8, 8, 6}));
  EXPECT_EQ(reduce("add", ": 1", "tensor<2xf32>", "0.0"), (std::vector<float>{8, 14}));
  EXPECT_EQ(reduce("add", ": 0, 1", "tensor<f32>", "0.0"), (std::vector<float>{22}));
  EXPECT_EQ(reduce("add", ": 1, 0", "tensor<f32>", "10.0"), (std::vector<float>{32}))
      << "the init value starts every result element";
  EXPECT_EQ(reduce("maximum", ": 0", "tensor<3xf32>", "-3.0e+38"), (std::vector<float>{7, 5, 4}));
  EXPECT_EQ(reduce("maximum", ": 1", "tensor<2xf32>", "-3.0e+38"), (std::vector<float>{5, 7}));
  EXPECT_EQ(reduce("maximum", ": 0, 1", "tensor<f32>", "-3.0E+38"), (std::vector<float>{7}));
  EXPECT_EQ(reduce("maximum", ": 0, 1", "tensor<f32>", "100.0"), (std::vector<float>{100}));
  EXPECT_EQ(reduce("minimum", "", "tensor<2x3xf32>", "3.0"), (std::vector<float>{1, 3, 2, 3, 3, 3}))
      << "no dimension: each element combined with the init value";
}

TEST(StablehloSubset, ReduceCombinesInIncreasingIndexOrder) {
  // ((0 + 1e8) + 1) + -1e8 is 0 in float, where (1e8 + -1e8) + 1 (row 0 out of order) or
  // ((0 + -1e8) + 1e8) + 1 (row 1 in decreasing order) is 1.
  const HostTensor x = F32({2, 3}, {1e8f, 1.0f, -1e8f, 1.0f, 1e8f, -1e8f});
  const std::vector<float> rows =
      Values<float>(RunOne(ReduceProgram("add", ": 1", "tensor<2xf32>", "0.0"), {x})[0]);
  EXPECT_EQ(rows,
            (std::vector<float>{((0.0f + 1e8f) + 1.0f) + -1e8f, ((0.0f + 1.0f) + 1e8f) + -1e8f}));
  EXPECT_EQ(rows, (std::vector<float>{0.0f, 0.0f}));
  const std::vector<float> all =
      Values<float>(RunOne(ReduceProgram("add", ": 0, 1", "tensor<f32>", "0.0"), {x})[0]);
  float expected = 0.0f;
  for (float v : Values<float>(x)) expected += v;
  EXPECT_EQ(all, (std::vector<float>{expected}));
}

TEST(StablehloSubset, ReduceChecksItsTypes) {
  const std::string wrong = ReduceProgram("add", ": 1", "tensor<3xf32>", "0.0");
  EXPECT_THAT(Refusal(wrong), HasSubstr("line 8 (}) {dimensions = array<i64: 1>}"));
  EXPECT_THAT(Refusal(wrong), HasSubstr("without the reduced dimensions (tensor<2xf32>)"));
  EXPECT_THAT(Refusal(ReduceProgram("add", ": 2", "tensor<2x3xf32>", "0.0")),
              HasSubstr("not distinct dimensions of its operand"));
  EXPECT_THAT(Refusal(ReduceProgram("divide", ": 1", "tensor<2xf32>", "0.0")), HasSubstr("line 6"));
}

TEST(StablehloSubset, BroadcastInDimMapsOperandDimensions) {
  const std::string text = Main(
      "%row: tensor<3xf32>, %column: tensor<2xf32>, %one: tensor<1x3xf32>, %s: tensor<f32>",
      "tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>",
      "    %rows = \"stablehlo.broadcast_in_dim\"(%row) {broadcast_dimensions = array<i64: 1>} : "
      "(tensor<3xf32>) -> tensor<2x3xf32>\n"
      "    %columns = \"stablehlo.broadcast_in_dim\"(%column) {broadcast_dimensions = array<i64: "
      "0>} : (tensor<2xf32>) -> tensor<2x3xf32>\n"
      "    %ones = \"stablehlo.broadcast_in_dim\"(%one) {broadcast_dimensions = array<i64: 0, 1>} "
      ": (tensor<1x3xf32>) -> tensor<2x3xf32>\n"
      "    %all = \"stablehlo.broadcast_in_dim\"(%s) {broadcast_dimensions = array<i64>} : "
      "(tensor<f32>) -> tensor<2x3xf32>\n"
      "    \"func.return\"(%rows, %columns, %ones, %all) : (tensor<2x3xf32>, tensor<2x3xf32>, "
      "tensor<2x3xf32>, tensor<2x3xf32>) -> ()\n");
  const std::vector<HostTensor> results =
      RunOne(text, {F32({3}, {1, 2, 3}), F32({2}, {10, 20}), F32({1, 3}, {4, 5, 6}), F32({}, {7})});
  EXPECT_EQ(Values<float>(results[0]), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(Values<float>(results[1]), (std::vector<float>{10, 10, 10, 20, 20, 20}));
  EXPECT_EQ(Values<float>(results[2]), (std::vector<float>{4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(Values<float>(results[3]), (std::vector<float>{7, 7, 7, 7, 7, 7}));

  std::string wrong = text;
  ReplaceAll(wrong, "array<i64: 1>", "array<i64: 0>");
  EXPECT_THAT(Refusal(wrong), HasSubstr("line 3"));
  EXPECT_THAT(Refusal(wrong), HasSubstr("broadcast_dimensions do not fit its types"));
}

TEST(StablehloSubset, UnaryOpsOfFloats) {
  const std::vector<std::string> ops = {"exponential", "log",  "negate", "sqrt",
                                        "rsqrt",       "tanh", "abs"};
  std::string body, results, list;
  for (const std::string& op : ops) {
    body +=
        "    %" + op + " = \"stablehlo." + op + "\"(%x) : (tensor<2x2xf32>) -> tensor<2x2xf32>\n";
    results += std::string(results.empty() ? "" : ", ") + "tensor<2x2xf32>";
    list += (list.empty() ? "%" : ", %") + op;
  }
  body += "    \"func.return\"(" + list + ") : (" + results + ") -> ()\n";
  const std::vector<float> x = {0.5f, 1.0f, 2.0f, 9.0f};
  const std::vector<HostTensor> out =
      RunOne(Main("%x: tensor<2x2xf32>", results, body), {F32({2, 2}, x)});
  ASSERT_EQ(out.size(), ops.size());
  std::vector<std::vector<float>> expected(ops.size());
  for (float v : x) {
    expected[0].push_back(std::exp(v));
    expected[1].push_back(std::log(v));
    expected[2].push_back(-v);
    expected[3].push_back(std::sqrt(v));
    expected[4].push_back(1.0f / std::sqrt(v));
    expected[5].push_back(std::tanh(v));
    expected[6].push_back(std::abs(v));
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(Values<float>(out[i]), expected[i]) << ops[i];
  }
  EXPECT_NEAR(Values<float>(out[0])[1], 2.7182817f, 1e-6f);
  EXPECT_EQ(Values<float>(out[4])[3], 1.0f / 3.0f);
  EXPECT_EQ(Values<float>(out[2])[0], -0.5f);

  const std::string f64 = Main("%x: tensor<f64>", "tensor<f64>",
                               "    %y = \"stablehlo.log\"(%x) : (tensor<f64>) -> tensor<f64>\n"
                               "    \"func.return\"(%y) : (tensor<f64>) -> ()\n");
  EXPECT_EQ(Values<double>(RunOne(f64, {Tensor<double>("f64", {}, {10.0})})[0]),
            (std::vector<double>{std::log(10.0)}));
}

TEST(StablehloSubset, NegateAndAbsOfIntegersWrap) {
  const std::string text =
      Main("%x: tensor<3xi32>", "tensor<3xi32>, tensor<3xi32>",
           "    %n = \"stablehlo.negate\"(%x) : (tensor<3xi32>) -> tensor<3xi32>\n"
           "    %a = \"stablehlo.abs\"(%x) : (tensor<3xi32>) -> tensor<3xi32>\n"
           "    \"func.return\"(%n, %a) : (tensor<3xi32>, tensor<3xi32>) -> ()\n");
  const int32_t lowest = std::numeric_limits<int32_t>::min();
  const std::vector<HostTensor> out = RunOne(text, {Tensor<int32_t>("i32", {3}, {-5, 7, lowest})});
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{5, -7, lowest}));
  EXPECT_EQ(Values<int32_t>(out[1]), (std::vector<int32_t>{5, 7, lowest}));

  const std::string log = Main("%x: tensor<3xi32>", "tensor<3xi32>",
                               "    %y = \"stablehlo.log\"(%x) : (tensor<3xi32>) -> tensor<3xi32>\n"
                               "    \"func.return\"(%y) : (tensor<3xi32>) -> ()\n");
  EXPECT_THAT(Refusal(log), HasSubstr("line 3"));
  EXPECT_THAT(Refusal(log), HasSubstr("stablehlo.log of i32 is not in the subset"));
}

TEST(StablehloSubset, SubtractOfFloatsAndWrappingIntegers) {
  auto subtract = [](const std::string& type) {
    return Main("%x: " + type + ", %y: " + type, type,
                "    %d = \"stablehlo.subtract\"(%x, %y) : (" + type + ", " + type + ") -> " +
                    type + "\n    \"func.return\"(%d) : (" + type + ") -> ()\n");
  };
  EXPECT_EQ(Values<float>(RunOne(subtract("tensor<3xf32>"),
                                 {F32({3}, {1.5f, 0.1f, -2.0f}), F32({3}, {0.5f, 0.3f, 2.0f})})[0]),
            (std::vector<float>{1.0f, 0.1f - 0.3f, -4.0f}));
  const int32_t lowest = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(
      Values<int32_t>(RunOne(subtract("tensor<2xi32>"), {Tensor<int32_t>("i32", {2}, {lowest, 5}),
                                                         Tensor<int32_t>("i32", {2}, {1, 7})})[0]),
      (std::vector<int32_t>{std::numeric_limits<int32_t>::max(), -2}));
  EXPECT_EQ(Values<uint8_t>(RunOne(
                subtract("tensor<2xui8>"),
                {Tensor<uint8_t>("ui8", {2}, {0, 200}), Tensor<uint8_t>("ui8", {2}, {1, 100})})[0]),
            (std::vector<uint8_t>{255, 100}));
}

// An all_reduce (add) of one f32 scalar per replica with the given replica_groups.
std::string ScalarAllReduce(int replicas, const std::string& groups) {
  return Module(replicas,
                "  func.func public @main(%x: tensor<f32>) -> tensor<f32> {\n"
                "    %sum = \"stablehlo.all_reduce\"(%x) ({\n"
                "    ^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):\n"
                "      %added = \"stablehlo.add\"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> "
                "tensor<f32>\n"
                "      \"stablehlo.return\"(%added) : (tensor<f32>) -> ()\n"
                "    }) {replica_groups = " +
                    groups +
                    "} : (tensor<f32>) -> tensor<f32>\n"
                    "    \"func.return\"(%sum) : (tensor<f32>) -> ()\n"
                    "  }\n");
}

TEST(StablehloSubset, ScalarAllReduceOverThreeReplicas) {
  const auto program =
      SubsetProgram::Parse(ScalarAllReduce(3, "dense<[[0, 1, 2]]> : tensor<1x3xi64>"));
  EXPECT_TRUE(program->argument_types()[0].dims.empty());
  // (r0 + r1) + r2, chorus's pairwise tree over three.
  const float a = 0.1f, b = 0.2f, c = 0.3f;
  const auto results = program->Run({{F32({}, {a})}, {F32({}, {b})}, {F32({}, {c})}});
  ASSERT_EQ(results.size(), 3u);
  for (const auto& replica : results) {
    EXPECT_EQ(Values<float>(replica[0]), (std::vector<float>{(a + b) + c}));
  }
}

TEST(StablehloSubset, EmptyReplicaGroupsAreOneGroupOfEveryReplica) {
  const auto none = SubsetProgram::Parse(ScalarAllReduce(3, "dense<> : tensor<0x0xi64>"));
  const auto every =
      SubsetProgram::Parse(ScalarAllReduce(3, "dense<[[0, 1, 2]]> : tensor<1x3xi64>"));
  const std::vector<std::vector<HostTensor>> arguments = {
      {F32({}, {1e8f})}, {F32({}, {1.0f})}, {F32({}, {-1e8f})}};
  const auto from_none = none->Run(arguments);
  const auto from_every = every->Run(arguments);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(*from_none[r][0].bytes, *from_every[r][0].bytes);
    EXPECT_EQ(Values<float>(from_none[r][0]), (std::vector<float>{(1e8f + 1.0f) + -1e8f}));
  }
  EXPECT_THAT(Refusal(ScalarAllReduce(3, "dense<[[0, 1, 1]]> : tensor<1x3xi64>")),
              HasSubstr("lists replica 1 twice"));
  EXPECT_THAT(Refusal(ScalarAllReduce(2, "dense<[[0, 2]]> : tensor<1x2xi64>")),
              HasSubstr("replica 2 is not one of the program's 2"));
}

// ---- Functions.

const char kCalls[] =
    "module @calls attributes {mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 1 : i32} {\n"
    "  func.func public @main(%a: tensor<2xf32>, %b_1: tensor<2xf32>) -> (tensor<2xf32>, "
    "tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {\n"
    "    %r:2 = \"func.call\"(%a, %b_1) {callee = @sum_and_difference} : (tensor<2xf32>, "
    "tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)\n"
    "    %s:2 = \"func.call\"(%r#0, %r#1) {callee = @sum_and_difference} : (tensor<2xf32>, "
    "tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)\n"
    "    %t = \"func.call\"(%s#1) {callee = @twice} : (tensor<2xf32>) -> tensor<2xf32>\n"
    "    %u = \"func.call\"(%r#1) {callee = @twice} : (tensor<2xf32>) -> (tensor<2xf32>)\n"
    "    \"func.return\"(%s#0, %s#1, %r#1, %t, %u) : (tensor<2xf32>, tensor<2xf32>, "
    "tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> ()\n"
    "  }\n"
    "  func.func private @sum_and_difference(%x: tensor<2xf32>, %y: tensor<2xf32>) -> "
    "(tensor<2xf32>, tensor<2xf32>) {\n"
    "    %sum = \"stablehlo.add\"(%x, %y) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n"
    "    %difference = \"stablehlo.subtract\"(%x, %y) : (tensor<2xf32>, tensor<2xf32>) -> "
    "tensor<2xf32>\n"
    "    \"func.return\"(%sum, %difference) : (tensor<2xf32>, tensor<2xf32>) -> ()\n"
    "  }\n"
    "  func.func private @twice(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
    "    %two = \"stablehlo.constant\"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>\n"
    "    %twos = \"stablehlo.broadcast_in_dim\"(%two) {broadcast_dimensions = array<i64>} : "
    "(tensor<f32>) -> tensor<2xf32>\n"
    "    %y = \"stablehlo.multiply\"(%x, %twos) : (tensor<2xf32>, tensor<2xf32>) -> "
    "tensor<2xf32>\n"
    "    \"func.return\"(%y) : (tensor<2xf32>) -> ()\n"
    "  }\n"
    "}\n";

TEST(StablehloSubset, FunctionsCallFunctionsDefinedLater) {
  const std::vector<HostTensor> out = RunOne(kCalls, {F32({2}, {1, 2}), F32({2}, {10, 30})});
  ASSERT_EQ(out.size(), 5u);
  // r = (a + b, a - b) = ([11, 32], [-9, -28]); s = (r0 + r1, r0 - r1) = (2a, 2b).
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(Values<float>(out[1]), (std::vector<float>{20, 60}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{-9, -28}));
  EXPECT_EQ(Values<float>(out[3]), (std::vector<float>{40, 120}));
  EXPECT_EQ(Values<float>(out[4]), (std::vector<float>{-18, -56}));
}

TEST(StablehloSubset, CollectivesInACalledFunctionCombineAcrossReplicas) {
  const std::string text = Module(
      2,
      "  func.func private @sum(%v: tensor<2xf32>) -> tensor<2xf32> {\n"
      "    %s = \"stablehlo.all_reduce\"(%v) ({\n"
      "    ^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):\n"
      "      %added = \"stablehlo.add\"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "      \"stablehlo.return\"(%added) : (tensor<f32>) -> ()\n"
      "    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> "
      "tensor<2xf32>\n"
      "    \"func.return\"(%s) : (tensor<2xf32>) -> ()\n"
      "  }\n"
      "  func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32>) {\n"
      "    %once = \"func.call\"(%x) {callee = @sum} : (tensor<2xf32>) -> tensor<2xf32>\n"
      "    %twice = \"func.call\"(%once) {callee = @sum} : (tensor<2xf32>) -> tensor<2xf32>\n"
      "    \"func.return\"(%twice) : (tensor<2xf32>) -> ()\n"
      "  }\n");
  const auto results = SubsetProgram::Parse(text)->Run({{F32({2}, {1, 2})}, {F32({2}, {10, 20})}});
  for (const auto& replica : results) {
    EXPECT_EQ(Values<float>(replica[0]), (std::vector<float>{22, 44}));
  }
}

TEST(StablehloSubset, CallsAreCheckedNamingTheLine) {
  std::string wrong_type = kCalls;
  ReplaceAll(wrong_type,
             "%t = \"func.call\"(%s#1) {callee = @twice} : (tensor<2xf32>) -> tensor<2xf32>",
             "%t = \"func.call\"(%s#1, %s#0) {callee = @twice} : (tensor<2xf32>, tensor<2xf32>) "
             "-> tensor<2xf32>");
  EXPECT_THAT(Refusal(wrong_type), HasSubstr("line 5 (%t = \"func.call\""));
  EXPECT_THAT(Refusal(wrong_type), HasSubstr("differ from @twice's arguments (tensor<2xf32>)"));

  std::string wrong_element = kCalls;
  ReplaceAll(wrong_element, "@twice(%x: tensor<2xf32>)", "@twice(%x: tensor<2xf64>)");
  EXPECT_THAT(Refusal(wrong_element), HasSubstr("line 5"));
  EXPECT_THAT(Refusal(wrong_element), HasSubstr("differ from @twice's arguments (tensor<2xf64>)"));

  std::string wrong_result = kCalls;
  ReplaceAll(wrong_result, "-> (tensor<2xf32>)\n", "-> (tensor<2xf32>, tensor<2xf32>)\n");
  EXPECT_THAT(Refusal(wrong_result), HasSubstr("line 6"));

  std::string unknown = kCalls;
  ReplaceAll(unknown, "{callee = @twice} : (tensor<2xf32>) -> tensor<2xf32>",
             "{callee = @thrice} : (tensor<2xf32>) -> tensor<2xf32>");
  EXPECT_THAT(Refusal(unknown), HasSubstr("line 5"));
  EXPECT_THAT(Refusal(unknown), HasSubstr("unknown callee @thrice"));

  std::string undefined = kCalls;
  ReplaceAll(undefined, "\"func.call\"(%s#1)", "\"func.call\"(%s#2)");
  EXPECT_THAT(Refusal(undefined), HasSubstr("line 5"));
  EXPECT_THAT(Refusal(undefined), HasSubstr("operand %s#2 is not defined before"));

  // @twice calls @sum_and_difference, which calls @twice: refused at the call closing the cycle.
  std::string cycle = kCalls;
  ReplaceAll(cycle,
             "    %y = \"stablehlo.multiply\"(%x, %twos) : (tensor<2xf32>, tensor<2xf32>) -> "
             "tensor<2xf32>\n",
             "    %y:2 = \"func.call\"(%x, %twos) {callee = @sum_and_difference} : "
             "(tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)\n");
  ReplaceAll(cycle, "\"func.return\"(%y) : (tensor<2xf32>) -> ()",
             "\"func.return\"(%y#0) : (tensor<2xf32>) -> ()");
  ReplaceAll(cycle,
             "    %sum = \"stablehlo.add\"(%x, %y) : (tensor<2xf32>, tensor<2xf32>) -> "
             "tensor<2xf32>\n",
             "    %sum = \"func.call\"(%x) {callee = @twice} : (tensor<2xf32>) -> tensor<2xf32>\n");
  EXPECT_THAT(Refusal(cycle), HasSubstr("line 17 (%y:2 = \"func.call\""));
  EXPECT_THAT(Refusal(cycle),
              HasSubstr("a recursive call (@sum_and_difference -> @twice -> @sum_and_difference)"));

  std::string self = kCalls;
  ReplaceAll(self,
             "    %y = \"stablehlo.multiply\"(%x, %twos) : (tensor<2xf32>, tensor<2xf32>) -> "
             "tensor<2xf32>\n",
             "    %y = \"func.call\"(%x) {callee = @twice} : (tensor<2xf32>) -> tensor<2xf32>\n");
  EXPECT_THAT(Refusal(self), HasSubstr("line 17"));
  EXPECT_THAT(Refusal(self), HasSubstr("a recursive call (@twice -> @twice)"));
}

TEST(StablehloSubset, AModuleHasOnePublicMain) {
  std::string no_main = kCalls;
  ReplaceAll(no_main, "public @main", "private @main");
  EXPECT_THAT(Refusal(no_main), HasSubstr("line 2"));
  std::string two_public = kCalls;
  ReplaceAll(two_public, "private @twice", "public @twice");
  EXPECT_THAT(Refusal(two_public), HasSubstr("line 14"));
  EXPECT_THAT(Refusal(two_public), HasSubstr("only @main is public"));
  std::string twice = kCalls;
  ReplaceAll(twice, "private @twice", "private @sum_and_difference");
  EXPECT_THAT(Refusal(twice), HasSubstr("@sum_and_difference is defined twice"));
  std::string unclosed = kCalls;
  ReplaceAll(unclosed, "  }\n  func.func private @twice", "  func.func private @twice");
  EXPECT_THAT(Refusal(unclosed), HasSubstr("line 13"));
  EXPECT_THAT(Refusal(unclosed), HasSubstr("expected } closing @sum_and_difference"));
}

// ---- The softmax regression step of examples/fashion_mnist.

constexpr int kBatch = 16, kPixels = 784, kClasses = 10;

std::string StepText(int replicas, const std::string& group) {
  std::ifstream file(std::string(CHORUS_SOURCE_DIR) +
                     "/examples/fashion_mnist/softmax_regression_step.mlir");
  std::stringstream text;
  text << file.rdbuf();
  std::string step = text.str();
  EXPECT_FALSE(step.empty()) << "cannot read softmax_regression_step.mlir";
  ReplaceAll(step, "dense<[[0]]> : tensor<1x1xi64>", group);
  ReplaceAll(step, "mhlo.num_replicas = 1 : i32",
             "mhlo.num_replicas = " + std::to_string(replicas) + " : i32");
  return step;
}

struct Batch {
  std::vector<float> x, y;  // [16, 784], [16, 10] (one-hot)
};

// Pseudo-random values in [0, 1) (a 64-bit LCG).
struct Random {
  uint64_t state;
  float Next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((state >> 40) & 0xffffff) / static_cast<float>(1 << 24);
  }
};

// Separable data: 40 features in [0, 1), the rest 0; the class is the argmax of features 0..9,
// whose feature is raised by 3.
Batch MakeBatch(Random& random) {
  Batch batch{std::vector<float>(kBatch * kPixels, 0.0f),
              std::vector<float>(kBatch * kClasses, 0.0f)};
  for (int i = 0; i < kBatch; ++i) {
    float* x = batch.x.data() + i * kPixels;
    for (int j = 0; j < 40; ++j) x[j] = random.Next();
    int label = 0;
    for (int c = 1; c < kClasses; ++c) label = x[c] > x[label] ? c : label;
    x[label] += 3.0f;
    batch.y[static_cast<size_t>(i * kClasses + label)] = 1.0f;
  }
  return batch;
}

std::vector<HostTensor> StepArguments(const std::vector<float>& w, const std::vector<float>& b,
                                      const Batch& batch) {
  return {F32({kPixels, kClasses}, w), F32({kClasses}, b), F32({kBatch, kPixels}, batch.x),
          F32({kBatch, kClasses}, batch.y)};
}

TEST(SoftmaxRegressionStep, LossFallsFromLn10OverTwoReplicas) {
  const auto step = SubsetProgram::Parse(StepText(2, "dense<[[0, 1]]> : tensor<1x2xi64>"));
  const auto no_groups = SubsetProgram::Parse(StepText(2, "dense<> : tensor<0x0xi64>"));
  ASSERT_EQ(step->num_replicas(), 2);
  ASSERT_EQ(step->result_types().size(), 3u);
  EXPECT_TRUE(step->result_types()[2].dims.empty());
  Random random{42};
  const std::vector<Batch> batches = {MakeBatch(random), MakeBatch(random)};
  std::vector<float> w(kPixels * kClasses, 0.0f), b(kClasses, 0.0f);
  float first = 0, last = 0;
  for (int s = 0; s < 30; ++s) {
    const std::vector<std::vector<HostTensor>> arguments = {StepArguments(w, b, batches[0]),
                                                            StepArguments(w, b, batches[1])};
    const auto results = step->Run(arguments);
    for (size_t j = 0; j < 3; ++j) {
      ASSERT_EQ(*results[0][j].bytes, *results[1][j].bytes)
          << "step " << s << ": the replicas' result " << j << " differs";
    }
    if (s < 2) {
      const auto same = no_groups->Run(arguments);
      for (size_t j = 0; j < 3; ++j) EXPECT_EQ(*same[0][j].bytes, *results[0][j].bytes);
    }
    const float loss = Values<float>(results[0][2])[0];
    if (s == 0) first = loss;
    last = loss;
    w = Values<float>(results[0][0]);
    b = Values<float>(results[0][1]);
  }
  EXPECT_NEAR(first, std::log(10.0f), 1e-5f);
  EXPECT_LT(last, std::log(10.0f) / 2) << "first loss " << first;
}

// One step of the same formulas, in float, as a plain C++ program would write them.
struct Reference {
  std::vector<float> w, b;
  float loss;
};

Reference ReferenceStep(const std::vector<float>& w, const std::vector<float>& b,
                        const Batch& batch) {
  std::vector<float> probabilities(kBatch * kClasses), errors(kBatch * kClasses);
  float log_likelihood = 0.0f;
  for (int i = 0; i < kBatch; ++i) {
    float logits[kClasses], exps[kClasses];
    float largest = -3.0e+38f;
    for (int c = 0; c < kClasses; ++c) {
      float sum = 0.0f;
      for (int j = 0; j < kPixels; ++j) sum += batch.x[i * kPixels + j] * w[j * kClasses + c];
      logits[c] = sum + b[static_cast<size_t>(c)];
      largest = std::max(largest, logits[c]);
    }
    float total = 0.0f;
    for (int c = 0; c < kClasses; ++c) {
      exps[c] = std::exp(logits[c] - largest);
      total += exps[c];
    }
    for (int c = 0; c < kClasses; ++c) {
      const size_t at = static_cast<size_t>(i * kClasses + c);
      probabilities[at] = exps[c] / total;
      log_likelihood += batch.y[at] * ((logits[c] - largest) - std::log(total));
      errors[at] = probabilities[at] - batch.y[at];
    }
  }
  const float step_size = 0.1f / static_cast<float>(kBatch);
  Reference out{w, b, -(log_likelihood / static_cast<float>(kBatch))};
  for (int j = 0; j < kPixels; ++j) {
    for (int c = 0; c < kClasses; ++c) {
      float gradient = 0.0f;
      for (int i = 0; i < kBatch; ++i) {
        gradient += batch.x[i * kPixels + j] * errors[static_cast<size_t>(i * kClasses + c)];
      }
      out.w[static_cast<size_t>(j * kClasses + c)] -= step_size * gradient;
    }
  }
  for (int c = 0; c < kClasses; ++c) {
    float gradient = 0.0f;
    for (int i = 0; i < kBatch; ++i) gradient += errors[static_cast<size_t>(i * kClasses + c)];
    out.b[static_cast<size_t>(c)] -= step_size * gradient;
  }
  return out;
}

TEST(SoftmaxRegressionStep, MatchesAFloatReferenceOnOneReplica) {
  const auto step = SubsetProgram::Parse(StepText(1, "dense<[[0]]> : tensor<1x1xi64>"));
  Random random{7};
  const Batch batch = MakeBatch(random);
  std::vector<float> w(kPixels * kClasses), b(kClasses);
  for (float& v : w) v = (random.Next() - 0.5f) * 0.2f;
  for (float& v : b) v = (random.Next() - 0.5f) * 0.2f;
  const std::vector<HostTensor> results = step->Run({StepArguments(w, b, batch)})[0];
  const Reference expected = ReferenceStep(w, b, batch);
  auto close = [](float actual, float reference) {
    return std::abs(actual - reference) <= 1e-5f * std::abs(reference);
  };
  const std::vector<float> new_w = Values<float>(results[0]), new_b = Values<float>(results[1]);
  ASSERT_EQ(new_w.size(), expected.w.size());
  for (size_t k = 0; k < new_w.size(); ++k) {
    ASSERT_TRUE(close(new_w[k], expected.w[k])) << k << ": " << new_w[k] << " vs " << expected.w[k];
  }
  for (size_t k = 0; k < new_b.size(); ++k) {
    EXPECT_TRUE(close(new_b[k], expected.b[k])) << k << ": " << new_b[k] << " vs " << expected.b[k];
  }
  const float loss = Values<float>(results[2])[0];
  EXPECT_TRUE(close(loss, expected.loss)) << loss << " vs " << expected.loss;
  EXPECT_GT(loss, 0.5f);
}

// The module chorus's tpu plugin runs for `steps` steps of the user's step on byte arguments:
// W and b carried (and donated), then x and y per step; it returns W, b and each step's loss.
std::string WrapperModule(const std::string& step_text, int replicas, int steps) {
  // The user's @main, made the module's private @chorus_replica_step.
  const size_t header = step_text.find("  func.func public @main(");
  const size_t end = step_text.rfind('}');
  std::string step = step_text.substr(header, end - header);
  ReplaceAll(step, "func.func public @main(", "func.func private @chorus_replica_step(");
  struct Argument {
    std::string dims;
    int64_t count;
  };
  const Argument kW{"784x10", 7840}, kB{"10", 10}, kX{"16x784", 12544}, kY{"16x10", 160};
  std::string arguments, body;
  int index = 0;
  auto add = [&](const Argument& argument, bool donated) {
    const std::string id = std::to_string(index++);
    const std::string n = std::to_string(argument.count);
    arguments += std::string(arguments.empty() ? "" : ", ") + "%arg" + id + ": tensor<" +
                 std::to_string(argument.count * 4) + "xui8>" +
                 (donated ? " {tf.aliasing_output = " + id + " : i32}" : "");
    body += "    %packed" + id + " = \"stablehlo.reshape\"(%arg" + id + ") : (tensor<" +
            std::to_string(argument.count * 4) + "xui8>) -> tensor<" + n + "x4xui8>\n";
    body += "    %flat" + id + " = \"stablehlo.bitcast_convert\"(%packed" + id + ") : (tensor<" +
            n + "x4xui8>) -> tensor<" + n + "xf32>\n";
    body += "    %typed" + id + " = \"stablehlo.reshape\"(%flat" + id + ") : (tensor<" + n +
            "xf32>) -> tensor<" + argument.dims + "xf32>\n";
    return "%typed" + id;
  };
  std::string w = add(kW, true), b = add(kB, true);
  const std::string types =
      "(tensor<784x10xf32>, tensor<10xf32>, tensor<16x784xf32>, tensor<16x10xf32>) -> "
      "(tensor<784x10xf32>, tensor<10xf32>, tensor<f32>)";
  std::vector<std::string> losses;
  for (int s = 0; s < steps; ++s) {
    const std::string x = add(kX, false), y = add(kY, false);
    const std::string name = "%step" + std::to_string(s);
    body += "    " + name + ":3 = \"func.call\"(" + w + ", " + b + ", " + x + ", " + y +
            ") {callee = @chorus_replica_step} : " + types + "\n";
    w = name + "#0";
    b = name + "#1";
    losses.push_back(name + "#2");
  }
  std::string results, returned, returned_types;
  int out = 0;
  auto pack = [&](const std::string& value, const std::string& dims, int64_t count) {
    const std::string id = std::to_string(out++), n = std::to_string(count);
    const std::string bytes = "tensor<" + std::to_string(count * 4) + "xui8>";
    body += "    %flatr" + id + " = \"stablehlo.reshape\"(" + value + ") : (tensor<" + dims +
            "f32>) -> tensor<" + n + "xf32>\n";
    body += "    %packedr" + id + " = \"stablehlo.bitcast_convert\"(%flatr" + id + ") : (tensor<" +
            n + "xf32>) -> tensor<" + n + "x4xui8>\n";
    body += "    %out" + id + " = \"stablehlo.reshape\"(%packedr" + id + ") : (tensor<" + n +
            "x4xui8>) -> " + bytes + "\n";
    returned += std::string(returned.empty() ? "%out" : ", %out") + id;
    returned_types += std::string(returned_types.empty() ? "" : ", ") + bytes;
  };
  pack(w, "784x10x", 7840);
  pack(b, "10x", 10);
  for (const std::string& loss : losses) pack(loss, "", 1);
  body += "    \"func.return\"(" + returned + ") : (" + returned_types + ") -> ()\n";
  return "module @chorus_replica_program attributes {mhlo.num_replicas = " +
         std::to_string(replicas) + " : i32, mhlo.num_partitions = 1 : i32} {\n" +
         "  func.func public @main(" + arguments + ") -> (" + returned_types + ") {\n" + body +
         "  }\n" + step + "}\n";
}

HostTensor AsBytes(const std::vector<float>& values) {
  auto bytes = std::make_shared<Bytes>(values.size() * sizeof(float));
  std::memcpy(bytes->data(), values.data(), bytes->size());
  return {TensorType{"ui8", {static_cast<int64_t>(bytes->size())}}, bytes};
}

TEST(SoftmaxRegressionStep, AWrapperOfTwoStepsGivesTheBytesOfTwoStepsByHand) {
  const std::string step_text = StepText(2, "dense<[[0, 1]]> : tensor<1x2xi64>");
  const auto wrapper = SubsetProgram::Parse(WrapperModule(step_text, 2, 2));
  EXPECT_EQ(wrapper->aliasing(), (std::vector<int>{0, 1, -1, -1, -1, -1}));
  ASSERT_EQ(wrapper->result_types().size(), 4u);
  EXPECT_EQ(wrapper->result_types()[3].dims, (std::vector<int64_t>{4}));
  const auto step = SubsetProgram::Parse(step_text);

  Random random{3};
  // batches[step][replica]
  std::vector<std::vector<Batch>> batches(2);
  for (auto& per_replica : batches) {
    per_replica = {MakeBatch(random), MakeBatch(random)};
  }
  std::vector<float> w(kPixels * kClasses), b(kClasses);
  for (float& v : w) v = (random.Next() - 0.5f) * 0.02f;
  for (float& v : b) v = (random.Next() - 0.5f) * 0.02f;

  std::vector<std::vector<HostTensor>> by_hand(2);
  std::vector<std::vector<HostTensor>> step_arguments = {StepArguments(w, b, batches[0][0]),
                                                         StepArguments(w, b, batches[0][1])};
  std::vector<HostTensor> losses0;
  for (int s = 0; s < 2; ++s) {
    if (s == 1) {
      for (size_t r = 0; r < 2; ++r) {
        step_arguments[r] = {by_hand[r][0], by_hand[r][1], F32({kBatch, kPixels}, batches[1][r].x),
                             F32({kBatch, kClasses}, batches[1][r].y)};
      }
    }
    const auto results = step->Run(step_arguments);
    if (s == 0) losses0 = {results[0][2], results[1][2]};
    by_hand = results;
  }

  std::vector<std::vector<HostTensor>> wrapper_arguments(2);
  for (size_t r = 0; r < 2; ++r) {
    wrapper_arguments[r] = {AsBytes(w),
                            AsBytes(b),
                            AsBytes(batches[0][r].x),
                            AsBytes(batches[0][r].y),
                            AsBytes(batches[1][r].x),
                            AsBytes(batches[1][r].y)};
  }
  const auto wrapped = wrapper->Run(wrapper_arguments);
  ASSERT_EQ(wrapped.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(wrapped[r].size(), 4u);
    EXPECT_EQ(*wrapped[r][0].bytes, *by_hand[r][0].bytes) << "W of replica " << r;
    EXPECT_EQ(*wrapped[r][1].bytes, *by_hand[r][1].bytes) << "b of replica " << r;
    EXPECT_EQ(*wrapped[r][2].bytes, *losses0[r].bytes) << "the first loss of replica " << r;
    EXPECT_EQ(*wrapped[r][3].bytes, *by_hand[r][2].bytes) << "the second loss of replica " << r;
  }
  EXPECT_NE(*by_hand[0][0].bytes, *AsBytes(w).bytes) << "the steps changed W";
}

// chorus's own programs run as before: the all-reduce stablehlo_programs.h writes (its text as
// pjrt_client_test.cc pins it), in the replica group's order.
TEST(StablehloSubset, ChorusAllReduceProgramsRunAsBefore) {
  // Replica 1's value first; the argument donated to the result.
  const std::string text = chorus::tpu::AllReduceProgram(
      {{CHORUS_F32, CHORUS_REDUCE_SUM, 3, chorus::tpu::ReplicaGroup{1, 0}, true}}, 2);
  const auto program = SubsetProgram::Parse(text);
  EXPECT_EQ(program->aliasing(), (std::vector<int>{0}));
  const auto results =
      program->Run({{AsBytes({1.0f, 2.0f, 3.0f})}, {AsBytes({10.0f, 20.0f, 1e-8f})}});
  for (const auto& replica : results) {
    // The group's order: replica 1's values first.
    EXPECT_EQ(Values<float>(replica[0]),
              (std::vector<float>{10.0f + 1.0f, 20.0f + 2.0f, 1e-8f + 3.0f}));
    EXPECT_EQ(replica[0].type.dims, (std::vector<int64_t>{12}));
  }
  std::string sine = text;
  ReplaceAll(sine, "stablehlo.reshape\"(%arg0)", "stablehlo.sine\"(%arg0)");
  EXPECT_THAT(Refusal(sine), HasSubstr("line 3"));
  EXPECT_THAT(Refusal(sine), HasSubstr("stablehlo.sine is not in the subset"));
}

// ---- chorus's reduce-scatter (ReduceScatterProgram): the all-reduce's values, split.

HostTensor ByteTensor(Bytes bytes) {
  const auto size = static_cast<int64_t>(bytes.size());
  return {TensorType{"ui8", {size}}, std::make_shared<Bytes>(std::move(bytes))};
}

// Bytes [begin, begin + size) of `tensor`.
Bytes Slice(const HostTensor& tensor, size_t begin, size_t size) {
  const auto start = tensor.bytes->begin() + static_cast<std::ptrdiff_t>(begin);
  return Bytes(start, start + static_cast<std::ptrdiff_t>(size));
}

// Runs chorus's reduce-scatter program and its all-reduce program (of count * group.size()
// values) on the same arguments, and expects the result of the replica at position k of the group
// to be part k of the all-reduce's, bit for bit. Returns the reduce-scatter's results.
std::vector<std::vector<HostTensor>> ExpectPartsOfTheAllReduce(
    chorus_dtype dtype, chorus_reduce_op op, size_t count, const chorus::tpu::ReplicaGroup& group,
    int replicas, const std::vector<std::vector<HostTensor>>& arguments) {
  const auto scatter =
      SubsetProgram::Parse(chorus::tpu::ReduceScatterProgram(dtype, op, count, group, replicas));
  const auto all_reduce = SubsetProgram::Parse(
      chorus::tpu::AllReduceProgram({{dtype, op, count * group.size(), group, false}}, replicas));
  const auto parts = scatter->Run(arguments);
  const auto sums = all_reduce->Run(arguments);
  const size_t part_bytes = count * chorus_dtype_size(dtype);
  for (size_t k = 0; k < group.size(); ++k) {
    const auto r = static_cast<size_t>(group[k]);
    EXPECT_EQ(parts[r][0].type.dims, (std::vector<int64_t>{static_cast<int64_t>(part_bytes)}));
    EXPECT_EQ(*parts[r][0].bytes, Slice(sums[r][0], k * part_bytes, part_bytes))
        << "replica " << r << ", position " << k << " of the group";
  }
  return parts;
}

TEST(StablehloSubset, ChorusReduceScatterGivesEachReplicaItsPartOfTheAllReduce) {
  const std::string text =
      chorus::tpu::ReduceScatterProgram(CHORUS_F32, CHORUS_REDUCE_SUM, 2, {0, 1}, 2);
  EXPECT_THAT(text, HasSubstr("%part = \"stablehlo.reduce_scatter\"(%in) ({\n"));
  EXPECT_THAT(text, HasSubstr("scatter_dimension = 0 : i64} : (tensor<4xf32>) -> tensor<2xf32>"));
  const auto results =
      ExpectPartsOfTheAllReduce(CHORUS_F32, CHORUS_REDUCE_SUM, 2, {0, 1}, 2,
                                {{AsBytes({1, 2, 3, 4})}, {AsBytes({10, 20, 30, 0.5f})}});
  EXPECT_EQ(Values<float>(results[0][0]), (std::vector<float>{11, 22}));
  EXPECT_EQ(Values<float>(results[1][0]), (std::vector<float>{33, 4.5f}));
}

TEST(StablehloSubset, ChorusReduceScatterSumsInTheGroupsOrder) {
  // Four replicas, group {2, 0, 3, 1}: element j of replica r is kBase[(r + j) % 4], whose float
  // sum depends on the order: for j = 0, (r2 + r0) + (r3 + r1) = (-1e8 + 1e8) + (1 + 1) = 2, where
  // (r0 + r1) + (r2 + r3) is 0 and ((r0 + r1) + r2) + r3 is 1.
  const std::vector<float> kBase = {1e8f, 1.0f, -1e8f, 1.0f};
  const chorus::tpu::ReplicaGroup group = {2, 0, 3, 1};
  std::vector<std::vector<float>> values(4, std::vector<float>(8));
  std::vector<std::vector<HostTensor>> arguments(4);
  for (size_t r = 0; r < 4; ++r) {
    for (size_t j = 0; j < 8; ++j) values[r][j] = kBase[(r + j) % 4];
    arguments[r] = {AsBytes(values[r])};
  }
  const auto results =
      ExpectPartsOfTheAllReduce(CHORUS_F32, CHORUS_REDUCE_SUM, 2, group, 4, arguments);
  for (size_t k = 0; k < 4; ++k) {
    std::vector<float> expected;
    for (size_t j = 2 * k; j < 2 * k + 2; ++j) {
      expected.push_back((values[2][j] + values[0][j]) + (values[3][j] + values[1][j]));
    }
    EXPECT_EQ(Values<float>(results[static_cast<size_t>(group[k])][0]), expected) << "part " << k;
  }
  EXPECT_EQ(Values<float>(results[2][0])[0], 2.0f);
  EXPECT_NE(Values<float>(results[2][0])[0],
            (values[0][0] + values[1][0]) + (values[2][0] + values[3][0]));
  EXPECT_NE(Values<float>(results[2][0])[0],
            ((values[0][0] + values[1][0]) + values[2][0]) + values[3][0]);
}

TEST(StablehloSubset, ChorusReduceScatterGivesPartKToTheGroupsKthReplica) {
  const std::string text =
      chorus::tpu::ReduceScatterProgram(CHORUS_U8, CHORUS_REDUCE_MAX, 3, {1, 0, 2}, 3);
  EXPECT_THAT(text, HasSubstr("%part = \"stablehlo.reduce_scatter\"(%arg0) ({\n"));
  const std::vector<std::vector<HostTensor>> arguments = {
      {ByteTensor({1, 2, 3, 4, 5, 6, 7, 8, 9})},
      {ByteTensor({9, 8, 7, 6, 5, 4, 3, 2, 1})},
      {ByteTensor({0, 10, 0, 0, 200, 0, 255, 0, 3})}};
  // The maximum: {9, 10, 7, 6, 200, 6, 255, 8, 9}.
  const auto results =
      ExpectPartsOfTheAllReduce(CHORUS_U8, CHORUS_REDUCE_MAX, 3, {1, 0, 2}, 3, arguments);
  EXPECT_EQ(*results[1][0].bytes, (Bytes{9, 10, 7}));
  EXPECT_EQ(*results[0][0].bytes, (Bytes{6, 200, 6}));
  EXPECT_EQ(*results[2][0].bytes, (Bytes{255, 8, 9}));

  // No replica_groups: every replica in order, replica r part r.
  std::string every = text;
  ReplaceAll(every, "dense<[[1, 0, 2]]> : tensor<1x3xi64>", "dense<> : tensor<0x0xi64>");
  const auto in_order = SubsetProgram::Parse(every)->Run(arguments);
  EXPECT_EQ(*in_order[0][0].bytes, (Bytes{9, 10, 7}));
  EXPECT_EQ(*in_order[1][0].bytes, (Bytes{6, 200, 6}));
  EXPECT_EQ(*in_order[2][0].bytes, (Bytes{255, 8, 9}));

  // A replica outside the group gets zeros, as from the interpreter's other collectives.
  const auto partial = SubsetProgram::Parse(chorus::tpu::ReduceScatterProgram(
                                                CHORUS_U8, CHORUS_REDUCE_SUM, 2, {2, 0}, 3))
                           ->Run({{ByteTensor({1, 2, 3, 4})},
                                  {ByteTensor({50, 50, 50, 50})},
                                  {ByteTensor({10, 20, 30, 40})}});
  EXPECT_EQ(*partial[2][0].bytes, (Bytes{11, 22}));
  EXPECT_EQ(*partial[0][0].bytes, (Bytes{33, 44}));
  EXPECT_EQ(*partial[1][0].bytes, (Bytes{0, 0}));
}

TEST(StablehloSubset, ChorusReduceScatterOfEveryDtypeAndOpIsPartOfTheAllReduce) {
  const chorus::tpu::ReplicaGroup group = {2, 0, 3, 1};
  const std::vector<float> scales = {1.0f, 300.0f, 0.01f, 30.0f};  // per replica
  Random random{11};
  for (chorus_dtype dtype : {CHORUS_F32, CHORUS_F64, CHORUS_F16, CHORUS_BF16, CHORUS_I32,
                             CHORUS_I64, CHORUS_U8, CHORUS_I8}) {
    const bool floating =
        dtype == CHORUS_F32 || dtype == CHORUS_F64 || dtype == CHORUS_F16 || dtype == CHORUS_BF16;
    for (chorus_reduce_op op :
         {CHORUS_REDUCE_SUM, CHORUS_REDUCE_PROD, CHORUS_REDUCE_MIN, CHORUS_REDUCE_MAX}) {
      for (size_t count : {size_t{1}, size_t{3}, size_t{17}}) {
        SCOPED_TRACE(std::string(chorus::tpu::StablehloElementType(dtype)) + ", op " +
                     std::to_string(op) + ", count " + std::to_string(count));
        const size_t n = count * group.size();
        std::vector<std::vector<HostTensor>> arguments(4);
        for (size_t r = 0; r < 4; ++r) {
          Bytes bytes(n * chorus_dtype_size(dtype));
          for (size_t i = 0; i < n; ++i) {
            const float unit = random.Next();  // [0, 1)
            const double value = floating             ? (2.0f * unit - 1.0f) * scales[r]
                                 : dtype == CHORUS_U8 ? std::floor(unit * 20.0f)
                                                      : std::floor(unit * 20.0f) - 10.0;
            chorus::sdk::StoreElement(bytes.data(), i, dtype, value);
          }
          arguments[r] = {ByteTensor(std::move(bytes))};
        }
        const auto results = ExpectPartsOfTheAllReduce(dtype, op, count, group, 4, arguments);
        if (op != CHORUS_REDUCE_MIN && op != CHORUS_REDUCE_MAX) continue;
        // Minimum and maximum exactly, whatever the order.
        for (size_t k = 0; k < group.size(); ++k) {
          for (size_t e = 0; e < count; ++e) {
            double expected = 0;
            for (size_t g = 0; g < group.size(); ++g) {
              const double v = chorus::sdk::LoadElement(
                  arguments[static_cast<size_t>(group[g])][0].bytes->data(), k * count + e, dtype);
              expected = g == 0                    ? v
                         : op == CHORUS_REDUCE_MIN ? std::min(expected, v)
                                                   : std::max(expected, v);
            }
            EXPECT_EQ(chorus::sdk::LoadElement(
                          results[static_cast<size_t>(group[k])][0].bytes->data(), e, dtype),
                      expected)
                << "part " << k << ", element " << e;
          }
        }
      }
    }
  }
}

// A reduce_scatter (add) of %x: tensor<2x4xf32> over two replicas, group {1, 0}.
std::string Rank2ReduceScatter(int dimension, const std::string& result) {
  return Module(2,
                "  func.func public @main(%x: tensor<2x4xf32>) -> " + result +
                    " {\n"
                    "    %part = \"stablehlo.reduce_scatter\"(%x) ({\n"
                    "    ^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):\n"
                    "      %added = \"stablehlo.add\"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> "
                    "tensor<f32>\n"
                    "      \"stablehlo.return\"(%added) : (tensor<f32>) -> ()\n"
                    "    }) {replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>, "
                    "scatter_dimension = " +
                    std::to_string(dimension) + " : i64} : (tensor<2x4xf32>) -> " + result +
                    "\n"
                    "    \"func.return\"(%part) : (" +
                    result +
                    ") -> ()\n"
                    "  }\n");
}

TEST(StablehloSubset, ReduceScatterAlongEitherDimensionOfARank2Operand) {
  // The sum is [[11, 22, 33, 44], [55, 66, 77, 88]]; replica 1 is the group's first.
  const std::vector<std::vector<HostTensor>> arguments = {
      {F32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}, {F32({2, 4}, {10, 20, 30, 40, 50, 60, 70, 80})}};
  const auto columns =
      SubsetProgram::Parse(Rank2ReduceScatter(1, "tensor<2x2xf32>"))->Run(arguments);
  EXPECT_EQ(columns[1][0].type.dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<float>(columns[1][0]), (std::vector<float>{11, 22, 55, 66}));
  EXPECT_EQ(Values<float>(columns[0][0]), (std::vector<float>{33, 44, 77, 88}));
  const auto rows = SubsetProgram::Parse(Rank2ReduceScatter(0, "tensor<1x4xf32>"))->Run(arguments);
  EXPECT_EQ(Values<float>(rows[1][0]), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(Values<float>(rows[0][0]), (std::vector<float>{55, 66, 77, 88}));
}

TEST(StablehloSubset, ReduceScatterOutsideTheSubsetIsRefusedNamingTheLine) {
  // Line 9 closes the f32 program's reduce_scatter; line 7 the u8 program's.
  const std::string f32 =
      chorus::tpu::ReduceScatterProgram(CHORUS_F32, CHORUS_REDUCE_SUM, 2, {0, 1}, 2);
  std::string dimension_1 = f32;
  ReplaceAll(dimension_1, "scatter_dimension = 0 : i64", "scatter_dimension = 1 : i64");
  EXPECT_THAT(Refusal(dimension_1), HasSubstr("line 9 (}) {replica_groups = dense<[[0, 1]]>"));
  EXPECT_THAT(Refusal(dimension_1),
              HasSubstr("reduce_scatter's scatter_dimension 1 is not a dimension of its operand "
                        "tensor<4xf32>"));

  std::string wrong_result = f32;
  ReplaceAll(wrong_result, "(tensor<4xf32>) -> tensor<2xf32>\n",
             "(tensor<4xf32>) -> tensor<4xf32>\n");
  EXPECT_THAT(Refusal(wrong_result), HasSubstr("line 9"));
  EXPECT_THAT(Refusal(wrong_result),
              HasSubstr("reduce_scatter's result type is not tensor<2xf32>"));

  std::string more_attributes = f32;
  ReplaceAll(more_attributes, "scatter_dimension = 0 : i64}",
             "scatter_dimension = 0 : i64, use_global_device_ids}");
  EXPECT_THAT(Refusal(more_attributes), HasSubstr("line 9"));
  EXPECT_THAT(Refusal(more_attributes),
              HasSubstr("expected the end of reduce_scatter with its replica_groups and "
                        "scatter_dimension"));
  std::string between = f32;
  ReplaceAll(between, "tensor<1x2xi64>, scatter_dimension",
             "tensor<1x2xi64>, channel_handle = 1, scatter_dimension");
  EXPECT_THAT(Refusal(between), HasSubstr("line 9"));

  std::string indivisible =
      chorus::tpu::ReduceScatterProgram(CHORUS_U8, CHORUS_REDUCE_MAX, 3, {1, 0, 2}, 3);
  ReplaceAll(indivisible, "9xui8", "8xui8");
  EXPECT_THAT(Refusal(indivisible), HasSubstr("line 7"));
  EXPECT_THAT(Refusal(indivisible),
              HasSubstr("reduce_scatter's scatter dimension (8) does not split into the group's 3 "
                        "equal parts"));

  std::string divide = f32;
  ReplaceAll(divide, "\"stablehlo.add\"(%lhs, %rhs)", "\"stablehlo.divide\"(%lhs, %rhs)");
  EXPECT_THAT(Refusal(divide), HasSubstr("line 7"));
  EXPECT_THAT(Refusal(divide), HasSubstr("expected one of add, multiply, minimum, maximum"));
}

// The compile options the tpu plugin writes with a device assignment (pjrt_client_test pins
// their bytes): replicas 2 on PJRT devices 3 and 1, read back.
TEST(StablehloSubset, CompileOptionsGiveTheReplicasAndTheirDeviceAssignment) {
  const std::string assigned = chorus::tpu::CompileOptionsProto(2, false, {3, 1});
  const CompileOptions options = ReadCompileOptions(assigned);
  EXPECT_EQ(options.num_replicas, 2);
  EXPECT_EQ(options.device_ids, (std::vector<int64_t>{3, 1}));
  // Unpacked ids read the same; no assignment is an empty list.
  const std::string unpacked =
      std::string("\x1a\x0e\x20\x02\x4a\x0a\x08\x02\x10\x01") + "\x1a\x04\x08\x03\x08\x01";
  EXPECT_EQ(ReadCompileOptions(unpacked).device_ids, (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(ReadCompileOptions(std::string("\x1a\x02\x20\x04")).device_ids.empty());
}

}  // namespace
}  // namespace chorus_stablehlo_subset_test
