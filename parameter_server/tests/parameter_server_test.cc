// ParameterServerStrategy and ClusterCoordinator with real ps and worker processes on 127.0.0.1
// (ps_test_task); this process is the chief.
#include <chorus/base/error.h>
#include <chorus/distribute/strategies.h>
#include <chorus/parameter_server/cluster_coordinator.h>
#include <chorus/parameter_server/parameter_server_strategy.h>
#include <chorus/runtime/registry.h>
#include <chorus/training/checkpoint.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "ps_cluster.h"
#include "regression_problem.h"

namespace chorus {
namespace {

using test::PsCluster;

Device Host() { return {Registry::Global().CpuDevices(), 0}; }

ParameterServerOptions QuickOptions() {
  ParameterServerOptions options;
  options.rpc_timeout = std::chrono::seconds(10);
  options.connect_timeout = std::chrono::seconds(20);
  return options;
}

std::unique_ptr<ParameterServerStrategy> MakeStrategy(
    const PsCluster& cluster, std::shared_ptr<const partitioners::Partitioner> partitioner = {}) {
  return std::make_unique<ParameterServerStrategy>(cluster.resolver(), std::move(partitioner),
                                                   QuickOptions());
}

Tensor Zeros(Shape shape) { return Tensor(Host(), CHORUS_F32, std::move(shape)); }

Tensor Iota(Shape shape) {
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  return Tensor::FromVector(Host(), shape, values);
}

std::string Diagnostics(PsCluster& cluster, int num_ps, int num_workers) {
  std::string out;
  for (int i = 0; i < num_ps; ++i)
    out += "--- ps " + std::to_string(i) + ":\n" + cluster.Output("ps", i);
  for (int i = 0; i < num_workers; ++i) {
    out += "--- worker " + std::to_string(i) + ":\n" + cluster.Output("worker", i);
  }
  return out;
}

// Trains the regression for `steps` steps, calling `during(completed)` while it runs; returns
// the final loss over every example. The variable is "w": the workers' function finds it by name.
double TrainRegression(ParameterServerStrategy& strategy, ClusterCoordinator& coordinator,
                       int steps, std::vector<RemoteValue>* values,
                       const std::function<void(int64_t)>& during = {}, float pause_ms = 0) {
  ShardedVariable w;
  {
    auto scope = strategy.scope();
    w = ShardedVariable::Create(VariableSpec{"w"}, Zeros({test::kFeatures}));
  }
  const PerWorkerDataset dataset = coordinator.create_per_worker_dataset("regression");
  for (int i = 0; i < steps; ++i) {
    std::vector<Tensor> args;
    if (pause_ms > 0) args.push_back(Tensor::FromVector(Host(), {1}, {pause_ms}));
    values->push_back(coordinator.schedule("regression_step", dataset.iterator(), args));
    if (during) during(coordinator.completed());
  }
  while (!coordinator.done()) {
    if (during) during(coordinator.completed());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  coordinator.join();
  return test::RegressionLoss(test::RegressionRows(), w.read().ToVector());
}

TEST(ParameterServerStrategy, AConvexProblemConverges) {
  PsCluster cluster(2, 2);
  auto strategy = MakeStrategy(cluster, std::make_shared<partitioners::FixedShardsPartitioner>(2));
  strategy->set_optimizer(ServerOptimizer::SGD(0.1f));
  ClusterCoordinator coordinator(*strategy);
  std::vector<RemoteValue> values;
  const double loss = TrainRegression(*strategy, coordinator, 400, &values);
  // Noise of standard deviation 0.1: the best loss is about 0.005.
  EXPECT_LT(loss, 0.0075) << Diagnostics(cluster, 2, 2);
  for (const RemoteValue& value : values) ASSERT_TRUE(value.is_ready());
  const std::vector<ShardPlacement>& shards = strategy->variables().front().shards();
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[0].ps, 0);
  EXPECT_EQ(shards[1].ps, 1);
  EXPECT_EQ(coordinator.completed(), 400);
  // Both workers took work.
  int by_worker[2] = {0, 0};
  for (const RemoteValue& value : values) by_worker[value.worker()] += 1;
  EXPECT_GT(by_worker[0], 0);
  EXPECT_GT(by_worker[1], 0);
}

TEST(ParameterServerStrategy, AKilledWorkersFunctionsRunElsewhereAndItTakesWorkWhenBack) {
  PsCluster cluster(1, 2);
  std::vector<RemoteValue> baseline_values;
  double baseline = 0;
  {
    auto strategy = MakeStrategy(cluster);
    strategy->set_optimizer(ServerOptimizer::SGD(0.1f));
    ClusterCoordinator coordinator(*strategy);
    coordinator.keep_servers_running();
    baseline = TrainRegression(*strategy, coordinator, 300, &baseline_values, {}, 10.0f);
  }
  // The same training by a new strategy on the same tasks, with worker 1 killed after 40 steps
  // and started again after 80.
  auto strategy = MakeStrategy(cluster);
  strategy->set_optimizer(ServerOptimizer::SGD(0.1f));
  ClusterCoordinator coordinator(*strategy);
  std::vector<RemoteValue> values;
  bool killed = false, restarted = false;
  int64_t restarted_at = 0;
  const double loss = TrainRegression(
      *strategy, coordinator, 300, &values,
      [&](int64_t completed) {
        if (!killed && completed >= 40) {
          cluster.Kill("worker", 1, SIGKILL);
          killed = true;
        }
        if (killed && !restarted && completed >= 80) {
          cluster.Restart("worker", 1);
          restarted = true;
          restarted_at = completed;
        }
      },
      10.0f);
  ASSERT_TRUE(killed && restarted);
  for (const RemoteValue& value : values) {
    ASSERT_TRUE(value.is_ready());
    EXPECT_NO_THROW(value.fetch());
  }
  EXPECT_EQ(coordinator.completed(), 300);
  // The closures of worker 1 that were in flight when it died ran again.
  EXPECT_GE(coordinator.retried(), 1);
  // Worker 1 came back and took work: some function scheduled late ran there.
  int late_on_worker_1 = 0;
  for (size_t i = static_cast<size_t>(restarted_at); i < values.size(); ++i) {
    late_on_worker_1 += values[i].worker() == 1 ? 1 : 0;
  }
  EXPECT_GT(late_on_worker_1, 0) << Diagnostics(cluster, 1, 2);
  EXPECT_LT(std::abs(loss - baseline), 0.05 * baseline) << "loss " << loss
                                                        << ", without a "
                                                           "failure "
                                                        << baseline;
}

TEST(ParameterServerStrategy, AKilledPsGivesOneErrorNamingIt) {
  PsCluster cluster(2, 2);
  auto strategy = MakeStrategy(cluster, std::make_shared<partitioners::FixedShardsPartitioner>(2));
  strategy->set_optimizer(ServerOptimizer::SGD(0.1f));
  ClusterCoordinator coordinator(*strategy);
  {
    auto scope = strategy->scope();
    ShardedVariable::Create(VariableSpec{"w"}, Zeros({test::kFeatures}));
  }
  const PerWorkerDataset dataset = coordinator.create_per_worker_dataset("regression");
  for (int i = 0; i < 20; ++i) coordinator.schedule("regression_step", dataset.iterator());
  coordinator.join();
  cluster.Kill("ps", 1, SIGKILL);
  std::string message;
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 200; ++i) {
      coordinator.schedule("regression_step", dataset.iterator(),
                           {Tensor::FromVector(Host(), {1}, {1.0f})});
    }
    coordinator.join();
  } catch (const Error& e) {
    message = e.what();
    EXPECT_EQ(e.status(), CHORUS_PEER_LOST);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(message.find("ps 1"), std::string::npos) << message;
  EXPECT_NE(message.find("restart"), std::string::npos) << message;
  // Raised once: what was in flight then fails quietly, and work that needs no ps goes on.
  for (int i = 0; i < 500 && !coordinator.done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(coordinator.done());
  const RemoteValue value =
      coordinator.schedule("add_one", {Tensor::FromVector(Host(), {1}, {1.0f})});
  EXPECT_EQ(value.fetch().at(0).ToVector(), std::vector<float>{2.0f});
  EXPECT_NO_THROW(coordinator.join());
}

// The time-out of the jobs below: CHORUS_TIMEOUT_SECONDS of their tasks, and the strategy's
// rpc_timeout (which its workers' functions take for their calls to the ps tasks).
constexpr auto kShortTimeout = std::chrono::seconds(2);

std::unique_ptr<ParameterServerStrategy> MakeShortTimeoutStrategy(const PsCluster& cluster) {
  ParameterServerOptions options = QuickOptions();
  options.rpc_timeout = kShortTimeout;
  auto strategy = std::make_unique<ParameterServerStrategy>(
      cluster.resolver(), std::make_shared<partitioners::FixedShardsPartitioner>(2), options);
  strategy->set_optimizer(ServerOptimizer::SGD(0.1f));
  {
    auto scope = strategy->scope();
    ShardedVariable::Create(VariableSpec{"w"}, Zeros({test::kFeatures}));
  }
  return strategy;
}

// Waits (up to `limit`) until the coordinator has done everything or raises an error; returns
// the error's message and status.
std::pair<std::string, chorus_status> ErrorWithin(ClusterCoordinator& coordinator,
                                                  std::chrono::seconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  try {
    while (!coordinator.done() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const Error& e) {
    return {e.what(), e.status()};
  }
  return {"no error within " + std::to_string(limit.count()) + " s", CHORUS_OK};
}

TEST(ParameterServerStrategy, AStoppedPsEndsTheJobNamingItWithinTheTimeOut) {
  PsCluster cluster(2, 2, {"CHORUS_TIMEOUT_SECONDS=2"});
  auto strategy = MakeShortTimeoutStrategy(cluster);
  ClusterCoordinator coordinator(*strategy);
  const PerWorkerDataset dataset = coordinator.create_per_worker_dataset("regression");
  const std::vector<Tensor> pause = {Tensor::FromVector(Host(), {1}, {5.0f})};
  for (int i = 0; i < 200; ++i) coordinator.schedule("regression_step", dataset.iterator(), pause);
  for (int i = 0; i < 5000 && coordinator.completed() < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GE(coordinator.completed(), 20) << Diagnostics(cluster, 2, 2);
  cluster.Kill("ps", 1, SIGSTOP);  // mid-training: alive, but answers nothing
  const auto stopped = std::chrono::steady_clock::now();
  const auto [message, status] = ErrorWithin(coordinator, kShortTimeout + std::chrono::seconds(8));
  const auto took = std::chrono::steady_clock::now() - stopped;
  cluster.Kill("ps", 1, SIGKILL);  // nothing is left stopped
  EXPECT_EQ(status, CHORUS_TIMEOUT) << message;
  EXPECT_NE(message.find("could not reach ps 1: ps 1 at"), std::string::npos) << message;
  EXPECT_NE(message.find("did not answer"), std::string::npos) << message;
  EXPECT_LT(took, kShortTimeout + std::chrono::seconds(2))
      << std::chrono::duration<double>(took).count() << " s: " << message;
}

TEST(ClusterCoordinator, AFunctionPastItsDeadlineOnLiveWorkersRunsThreeTimesThenFailsNamingIt) {
  PsCluster cluster(1, 2);
  auto strategy = MakeStrategy(cluster);
  CoordinatorOptions options;
  options.function_timeout = std::chrono::milliseconds(500);
  ClusterCoordinator coordinator(*strategy, options);
  const auto start = std::chrono::steady_clock::now();
  coordinator.schedule("sleep", {Tensor::FromVector(Host(), {1}, {1500.0f})});
  const auto [message, status] = ErrorWithin(coordinator, std::chrono::seconds(10));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status, CHORUS_TIMEOUT) << message;
  EXPECT_NE(message.find("function 'sleep' ran past its deadline of 0.5 s 3 times (on worker "),
            std::string::npos)
      << message;
  EXPECT_EQ(coordinator.retried(), 2);
  EXPECT_LT(took, std::chrono::seconds(5)) << message;
}

TEST(ClusterCoordinator, AStoppedPsPastAShortFunctionDeadlineFailsTheJobNamingIt) {
  // function_timeout below rpc_timeout: each worker cuts its ps call short at the run's deadline
  // and says so; after three runs the job fails, naming the ps the function waited for.
  PsCluster cluster(2, 2, {"CHORUS_TIMEOUT_SECONDS=2"});
  auto strategy = MakeShortTimeoutStrategy(cluster);
  CoordinatorOptions options;
  options.function_timeout = std::chrono::seconds(1);
  ClusterCoordinator coordinator(*strategy, options);
  const PerWorkerDataset dataset = coordinator.create_per_worker_dataset("regression");
  coordinator.schedule("regression_step", dataset.iterator());
  coordinator.join();
  cluster.Kill("ps", 1, SIGSTOP);
  coordinator.schedule("regression_step", dataset.iterator());
  const auto [message, status] = ErrorWithin(coordinator, std::chrono::seconds(10));
  cluster.Kill("ps", 1, SIGKILL);
  EXPECT_EQ(status, CHORUS_TIMEOUT) << message;
  EXPECT_NE(message.find("ran past its deadline of 1.0 s 3 times"), std::string::npos) << message;
  EXPECT_NE(message.find("ps 1 at"), std::string::npos) << message;
}

TEST(ParameterServerStrategy, ASecondProcessAsTheSameTaskFailsNamingThePortAndTheTask) {
  PsCluster cluster(1, 1);
  auto strategy = MakeStrategy(cluster);  // ps 0 and worker 0 serve
  for (const std::string type : {"ps", "worker"}) {
    std::string output;
    const int code = cluster.RunProcessAs(type, 0, 5000, &output);
    EXPECT_EQ(code, 1) << type << " 0's duplicate: " << output;
    const std::string address = strategy->cluster_resolver().cluster_spec().at(type).at(0);
    const std::string port = address.substr(address.rfind(':') + 1);
    const std::string expected = type + " 0 cannot serve at " + address +
                                 " (TF_CONFIG's address for it): port " + port + " is taken";
    EXPECT_NE(output.find(expected), std::string::npos) << output;
  }
  // The first ones still serve the job.
  ShardedVariable variable;
  {
    auto scope = strategy->scope();
    variable = ShardedVariable::Create(VariableSpec{"v"}, Iota({4}));
  }
  EXPECT_EQ(variable.read().ToVector(), Iota({4}).ToVector());
  ClusterCoordinator coordinator(*strategy);
  EXPECT_EQ(coordinator.schedule("add_one", {Iota({1})}).fetch().at(0).ToVector(),
            std::vector<float>{1.0f});
}

// How many chiefs the next test runs: one costs 5 to 10 s under the sanitizers, which find a use
// of a destroyed object in one run (TSan did, 3 times in 3) where the release build may be lucky.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kExitingChiefs = 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr int kExitingChiefs = 1;
#else
constexpr int kExitingChiefs = 8;
#endif
#else
constexpr int kExitingChiefs = 8;
#endif

TEST(ClusterCoordinator, AChiefThatExitsWhileFunctionsRunEndsWithItsExitCode) {
  // exit() (a signal handler's, a plugin's) destroys the static objects while the coordinator's
  // threads still turn results into tensors: before they stopped asking the destroyed registry,
  // one such chief in 2 to 5 died of SIGSEGV. (No plugins: a plugin's handler would hide it.)
  PsCluster cluster(1, 2);
  for (int run = 0; run < kExitingChiefs; ++run) {
    std::string output;
    const int code = cluster.RunProcessAs(
        "chief", 0, 20000, &output,
        {"CHORUS_PS_TEST_CHIEF=exit_while_functions_run", "CHORUS_PLUGINS=none"});
    ASSERT_EQ(code, 3) << "run " << run << ": " << output;
  }
}

TEST(ClusterCoordinator, AStoppedWorkersFunctionsPassTheirDeadlineAndRunElsewhere) {
  PsCluster cluster(1, 2);
  auto strategy = MakeStrategy(cluster);
  strategy->set_optimizer(ServerOptimizer::SGD(0.1f));
  CoordinatorOptions options;
  options.function_timeout = std::chrono::seconds(2);
  ClusterCoordinator coordinator(*strategy, options);
  std::vector<RemoteValue> values;
  bool stopped = false;
  const double loss = TrainRegression(
      *strategy, coordinator, 150, &values,
      [&](int64_t completed) {
        if (!stopped && completed >= 20) {
          cluster.Kill("worker", 1, SIGSTOP);  // alive, but answers nothing
          stopped = true;
        }
      },
      5.0f);
  ASSERT_TRUE(stopped);
  for (const RemoteValue& value : values) ASSERT_NO_THROW(value.fetch());
  EXPECT_EQ(coordinator.completed(), 150);
  EXPECT_GE(coordinator.retried(), 1);
  EXPECT_LT(loss, 0.02);
  cluster.Kill("worker", 1, SIGKILL);  // the destructor's Shutdown would wait for it
}

TEST(ClusterCoordinator, AFunctionsErrorIsRaisedOnceAndLaterSchedulesWork) {
  PsCluster cluster(1, 2);
  auto strategy = MakeStrategy(cluster);
  ClusterCoordinator coordinator(*strategy);
  const RemoteValue failed = coordinator.schedule("throw");
  std::string message;
  try {
    coordinator.join();
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("deliberate failure in 'throw'"), std::string::npos) << message;
  EXPECT_THROW(failed.fetch(), Error);
  EXPECT_TRUE(coordinator.done());  // raised once: not again
  const RemoteValue value =
      coordinator.schedule("add_one", {Tensor::FromVector(Host(), {3}, {1.0f, 2.0f, 3.0f})});
  EXPECT_EQ(value.fetch().at(0).ToVector(), (std::vector<float>{2.0f, 3.0f, 4.0f}));
  EXPECT_NO_THROW(coordinator.join());
  // A name no worker registered is an error naming it.
  coordinator.schedule("no_such_function");
  try {
    coordinator.join();
    FAIL() << "an unregistered function ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no_such_function' is not registered"), std::string::npos)
        << e.what();
  }
}

TEST(ParameterServerStrategy, ThirteenRowsInFiveShardsAre33322OnPs01010) {
  PsCluster cluster(2, 1);
  auto strategy = MakeStrategy(cluster, std::make_shared<partitioners::FixedShardsPartitioner>(5));
  ShardedVariable variable;
  {
    auto scope = strategy->scope();
    variable = ShardedVariable::Create(VariableSpec{"embedding"}, Iota({13, 2}));
  }
  std::vector<int64_t> rows;
  std::vector<int> ps;
  for (const ShardPlacement& shard : variable.shards()) {
    rows.push_back(shard.shape.at(0));
    ps.push_back(shard.ps);
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{3, 3, 3, 2, 2}));
  EXPECT_EQ(ps, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(variable.read().ToVector(), Iota({13, 2}).ToVector());
  variable.assign_add(Iota({13, 2}));
  std::vector<float> doubled = Iota({13, 2}).ToVector();
  for (float& v : doubled) v *= 2;
  EXPECT_EQ(variable.read().ToVector(), doubled);
  EXPECT_THROW(variable.assign(Zeros({12, 2})), Error);
}

TEST(ShardedCheckpoint, RestoresIntoAnotherShardCountAndIntoAPlainVariable) {
  PsCluster cluster(2, 1);
  const std::string path = ::testing::TempDir() + "/ps_checkpoint_" + std::to_string(getpid());
  std::vector<float> saved_m;
  {
    auto strategy =
        MakeStrategy(cluster, std::make_shared<partitioners::FixedShardsPartitioner>(3));
    strategy->set_optimizer(ServerOptimizer::Adam(0.01f));
    ShardedVariable embedding = strategy->CreateVariable(VariableSpec{"embedding"}, Iota({13, 4}));
    ApplyGradients({{Iota({13, 4}), embedding}});
    ApplyGradients({{Iota({13, 4}), embedding}});
    ShardedCheckpoint checkpoint;
    checkpoint.Track("embedding", embedding).TrackOptimizer("optimizer");
    checkpoint.Save(path);
    ClusterCoordinator coordinator(*strategy);
    coordinator.keep_servers_running();
  }
  // Another strategy (two shards) on the same ps tasks.
  auto strategy = MakeStrategy(cluster, std::make_shared<partitioners::FixedShardsPartitioner>(2));
  strategy->set_optimizer(ServerOptimizer::Adam(0.01f));
  ShardedVariable embedding = strategy->CreateVariable(VariableSpec{"embedding"}, Zeros({13, 4}));
  ASSERT_EQ(embedding.shards().size(), 2u);
  ShardedCheckpoint checkpoint;
  checkpoint.Track("embedding", embedding).TrackOptimizer("optimizer");
  EXPECT_EQ(checkpoint.Restore(path), 2);  // the step to resume at

  // Into a plain variable with no strategy, through chorus::Checkpoint.
  Variable plain = Variable::Create(VariableSpec{"embedding"}, Zeros({13, 4}));
  Variable plain_m = Variable::Create(VariableSpec{"embedding/m", false}, Zeros({13, 4}));
  Checkpoint reader;
  reader.Track("embedding", plain).Track("optimizer/embedding/m", plain_m);
  reader.Restore(path);
  EXPECT_EQ(embedding.read().ToVector(), plain.value().ToVector());
  // Adam moved every weight away from its initial value.
  EXPECT_NE(plain.value().ToVector(), Iota({13, 4}).ToVector());
  // The first moment after two steps of gradient g: (1 - 0.9^2) g = 0.19 g.
  const std::vector<float> m = plain_m.value().ToVector();
  for (size_t i = 0; i < m.size(); ++i) {
    ASSERT_NEAR(m[i], 0.19f * static_cast<float>(i), 1e-3f * (1.0f + static_cast<float>(i)));
  }
  // Into MirroredStrategy's variables (2 cpu replicas), through the same chorus::Checkpoint.
  {
    auto cpu = DeviceEnumerator::Create(Registry::Global().FindPlugin(kBuiltinPluginName),
                                        {{"count", "2"}});
    MirroredStrategy mirrored({Device{cpu, 0}, Device{cpu, 1}});
    auto scope = mirrored.scope();
    Variable replicated = Variable::Create(VariableSpec{"embedding"}, Zeros({13, 4}));
    Checkpoint into_mirrored;
    into_mirrored.Track("embedding", replicated);
    into_mirrored.Restore(path);
    ASSERT_EQ(replicated.components().size(), 2u);
    for (const Tensor& copy : replicated.components()) {
      EXPECT_EQ(copy.ToVector(), plain.value().ToVector());
    }
  }
  // Saved again from two shards, it holds the same values.
  const std::string again = path + "_again";
  ShardedCheckpoint(checkpoint).Save(again);
  Variable reread = Variable::Create(VariableSpec{"embedding"}, Zeros({13, 4}));
  Checkpoint second;
  second.Track("embedding", reread);
  second.Restore(again);
  EXPECT_EQ(reread.value().ToVector(), plain.value().ToVector());
  std::filesystem::remove(path);
  std::filesystem::remove(again);
}

TEST(ParameterServerStrategy, TasksOfAJobWithASecretAdmitOnlyItsHolders) {
  const std::string secret = "CHORUS_JOB_SECRET=ps-test-secret-0123456789abcdef";
  unsetenv("CHORUS_JOB_SECRET");
  PsCluster cluster(1, 1, {secret});
  // This process lacks the secret: the ps refuses it, and says what to do.
  try {
    MakeStrategy(cluster);
    FAIL() << "a chief without the job's secret was admitted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("admits only holders of the job's secret"), std::string::npos)
        << message;
    EXPECT_NE(message.find("CHORUS_JOB_SECRET"), std::string::npos) << message;
  }
  // With it, the job runs.
  setenv("CHORUS_JOB_SECRET", secret.substr(secret.find('=') + 1).c_str(), 1);
  {
    auto strategy = MakeStrategy(cluster);
    ClusterCoordinator coordinator(*strategy);
    const RemoteValue value =
        coordinator.schedule("add_one", {Tensor::FromVector(Host(), {1}, {41.0f})});
    EXPECT_EQ(value.fetch().at(0).ToVector(), std::vector<float>{42.0f});
  }
  unsetenv("CHORUS_JOB_SECRET");
  EXPECT_TRUE(cluster.WaitAll(10000));
}

TEST(ClusterCoordinator, EndsTheServersWhenDestroyed) {
  PsCluster cluster(1, 2);
  {
    auto strategy = MakeStrategy(cluster);
    ClusterCoordinator coordinator(*strategy);
    coordinator.schedule("empty");
    coordinator.join();
  }
  EXPECT_TRUE(cluster.WaitAll(10000)) << Diagnostics(cluster, 1, 2);
  for (const auto& [type, index] :
       std::vector<std::pair<std::string, int>>{{"ps", 0}, {"worker", 0}, {"worker", 1}}) {
    int code = -1;
    EXPECT_TRUE(cluster.Exited(type, index, &code));
    EXPECT_EQ(code, 0) << type << " " << index;
  }
}

}  // namespace
}  // namespace chorus
