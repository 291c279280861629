// FitWithParameterServers with real ps and worker processes (this process the chief): the
// softmax regression trains, the epoch's figures and the chief's copy of the model come back,
// callbacks run, and what cannot work under parameter servers is refused with a message.
#include <chorus/base/error.h>
#include <chorus/parameter_server/fit.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fit_model.h"
#include "ps_cluster.h"

namespace chorus {
namespace {

using test::PsCluster;

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

class ParameterServerFit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::RegisterFitModelForTests(); }
};

TEST_F(ParameterServerFit, TrainsTheModelOnTheWorkersAndReportsEveryEpoch) {
  PsCluster cluster(2, 2);
  ParameterServerOptions quick;
  quick.rpc_timeout = std::chrono::seconds(20);
  quick.connect_timeout = std::chrono::seconds(20);
  ParameterServerStrategy strategy(
      cluster.resolver(), std::make_shared<partitioners::FixedShardsPartitioner>(2), quick);
  strategy.set_optimizer(ServerOptimizer::Adam(0.05f));
  ClusterCoordinator coordinator(strategy);

  const Dataset validation =
      testing::SeparableData(test::kFitExamples, test::kFitInputs, test::kFitClasses, 11);
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  ProgressBar progress(ProgressBar::Mode::kLines, log);
  ParameterServerFitOptions options;
  options.epochs = 3;
  options.steps_per_epoch = 30;
  options.validation_data = &validation;
  options.callbacks = {&progress};
  std::unique_ptr<TrainableModel> trained;
  const History history = FitWithParameterServers(coordinator, test::kFitModel, options, &trained);

  ASSERT_EQ(history.epochs.size(), 3u) << cluster.Output("worker", 0);
  EXPECT_LT(history.epochs.back().loss, 0.8 * history.epochs.front().loss);
  EXPECT_GT(*history.epochs.back().val_accuracy, 0.7);
  EXPECT_EQ(history.epochs.front().steps, 30);
  EXPECT_EQ(coordinator.completed(), 90);
  // The variables are the model's, on the ps tasks, in 2 shards; the chief's copy holds them.
  const std::vector<ShardedVariable> variables = strategy.variables();
  ASSERT_EQ(variables.size(), 2u);
  EXPECT_EQ(variables[0].name(), "linear/kernel");
  EXPECT_EQ(variables[0].shards().size(), 2u);
  ASSERT_NE(trained, nullptr);
  EXPECT_EQ(trained->trainable_variables()[0].value().ToVector(), variables[0].read().ToVector());

  std::rewind(log);
  std::string text;
  for (int c; (c = std::fgetc(log)) != EOF;) text += static_cast<char>(c);
  std::fclose(log);
  EXPECT_NE(text.find("Epoch 3/3\n30/30 - "), std::string::npos) << text;
  EXPECT_NE(text.find(" - val_accuracy: "), std::string::npos) << text;

  // A second fit of the same model goes on from the ps tasks' weights.
  options.epochs = 1;
  options.callbacks = {};
  const History more = FitWithParameterServers(coordinator, test::kFitModel, options);
  EXPECT_LT(more.epochs.front().loss, history.epochs.front().loss);
  EXPECT_EQ(strategy.variables().size(), 2u);

  BackupAndRestore backup(::testing::TempDir() + "/chorus_ps_fit_backup");
  options.callbacks = {&backup};
  EXPECT_NE(ErrorOf([&] {
              FitWithParameterServers(coordinator, test::kFitModel, options);
            }).find("BackupAndRestore needs the optimizer's state in this process"),
            std::string::npos);
  options.callbacks = {};
  EXPECT_NE(ErrorOf([&] {
              FitWithParameterServers(coordinator, "nonesuch", options);
            }).find("no model 'nonesuch' is registered (registered: linear_softmax)"),
            std::string::npos);
  options.steps_per_epoch = 0;
  EXPECT_NE(ErrorOf([&] {
              FitWithParameterServers(coordinator, test::kFitModel, options);
            }).find("steps_per_epoch must be positive"),
            std::string::npos);
}

}  // namespace
}  // namespace chorus
