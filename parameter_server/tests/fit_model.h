// The model FitWithParameterServers trains in the tests: the fit loop's softmax regression
// (tests/support), registered by name in the chief (the test) and in every worker and ps task.
#ifndef CHORUS_PARAMETER_SERVER_TESTS_FIT_MODEL_H_
#define CHORUS_PARAMETER_SERVER_TESTS_FIT_MODEL_H_

#include <chorus/parameter_server/fit.h>

#include <memory>

#include "../../tests/support/linear_softmax_model.h"

namespace chorus::test {

inline constexpr const char* kFitModel = "linear_softmax";
inline constexpr int64_t kFitInputs = 6, kFitClasses = 4, kFitExamples = 480;

// Every worker's training data: its shard of one labelled set, batches of 16.
inline void RegisterFitModelForTests() {
  RegisterFitModel(
      kFitModel,
      [] { return std::make_unique<testing::LinearSoftmaxModel>(kFitInputs, kFitClasses, 1e-3f); },
      [](const InputContext& input) {
        return testing::SeparableData(kFitExamples, kFitInputs, kFitClasses, 11)
            .Shard(input.num_input_pipelines(), input.input_pipeline_id())
            .Shuffle(static_cast<uint64_t>(input.input_pipeline_id()) + 1)
            .Batch(16, true);
      });
}

}  // namespace chorus::test

#endif  // CHORUS_PARAMETER_SERVER_TESTS_FIT_MODEL_H_
