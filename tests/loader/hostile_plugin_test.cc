// Plugins that try to take a job down: an entry point that crashes or never returns, a library
// constructor that takes over SIGTERM, a collective call that ignores its time-out and its abort,
// an exception across the C ABI, a table of size 0, a score out of range. Each must end as a
// named error or a warning, and never crash or hang a job that does not use the plugin. The
// variants of fake_plugin.cc are in a folder of their own (FAKE_HOSTILE_DIR), so that no other
// test opens them.
#include <chorus/base/error.h>
#include <chorus/base/exit_status.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace chorus {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string Hostile(const std::string& name) {
  return std::string(FAKE_HOSTILE_DIR) + "/libchorus-" + name + ".so";
}

// A fresh vetting cache per test, so that each test sees the first try of a file.
class HostilePlugins : public ::testing::Test {
 protected:
  void SetUp() override {
    // Without the program, plugins load untried and the crashing fake would take this test down.
    ASSERT_EQ(::access(VET_PROGRAM, X_OK), 0)
        << VET_PROGRAM << " is missing: build the chorus-plugin-vet target";
    cache_ = fs::temp_directory_path() /
             ("chorus-vetting-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(cache_);
    setenv("CHORUS_CACHE_DIR", cache_.c_str(), 1);
    setenv("CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS", "2", 1);
    unsetenv("CHORUS_PLUGIN_VETTING");
  }
  void TearDown() override {
    fs::remove_all(cache_);
    unsetenv("CHORUS_CACHE_DIR");
    unsetenv("CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS");
  }

  // The registry of the hostile folder, restricted to `filter`.
  static Registry Only(const std::string& filter) {
    LoaderOptions options;
    options.search_dirs = {FAKE_HOSTILE_DIR};
    options.filter = filter;
    return Registry(options);
  }

  fs::path cache_;
};

const Rejection* RejectionOf(const Discovery& discovery, const std::string& name) {
  for (const auto& rejection : discovery.rejected) {
    if (rejection.path.find("libchorus-" + name + ".so") != std::string::npos) return &rejection;
  }
  return nullptr;
}

TEST_F(HostilePlugins, AnEntryPointThatCrashesOrHangsIsRejectedAndTheOthersLoad) {
  LoaderOptions options;
  options.search_dirs = {FAKE_HOSTILE_DIR};
  options.filter = "fake_entry_crashes,fake_entry_hangs,fake_takes_signals";
  const Discovery discovery = DiscoverPlugins(options);

  ASSERT_EQ(discovery.loaded.size(), 1u);
  EXPECT_EQ(discovery.loaded[0]->name(), "fake_takes_signals");
  const Rejection* crashed = RejectionOf(discovery, "fake_entry_crashes");
  ASSERT_NE(crashed, nullptr);
  // Killed by SIGSEGV; in a sanitizer build, ended by the sanitizer's report.
  EXPECT_NE(crashed->reason.find("the process when chorus opened it in a separate process to try "
                                 "it (chorus-plugin-vet)"),
            std::string::npos)
      << crashed->reason;
  EXPECT_NE(crashed->reason.find("CHORUS_PLUGINS=^fake_entry_crashes"), std::string::npos)
      << crashed->reason;
  const Rejection* hung = RejectionOf(discovery, "fake_entry_hangs");
  ASSERT_NE(hung, nullptr);
  EXPECT_NE(hung->reason.find("did not finish within 2 s"), std::string::npos) << hung->reason;

  // The verdicts are kept by path, size and time, for the next process.
  size_t rejected = 0, usable = 0;
  for (const auto& entry : fs::directory_iterator(cache_ / "plugin-vetting")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find("\nrejected\n") != std::string::npos) ++rejected;
    if (text.str().find("\nok\n") != std::string::npos) ++usable;
  }
  EXPECT_EQ(rejected, 2u);
  EXPECT_EQ(usable, 1u);
}

// Without a writable home (a batch system's, a container's) the verdicts go to a folder of the
// user's own under $TMPDIR, so that every process does not try every plugin again.
TEST_F(HostilePlugins, WithoutAWritableHomeTheVerdictsGoToAPrivateTemporaryFolder) {
  const std::string home_is_a_file = (cache_ / "home").string();
  fs::create_directories(cache_);
  std::ofstream(home_is_a_file).close();
  unsetenv("CHORUS_CACHE_DIR");
  const std::optional<std::string> home =
      getenv("HOME") ? std::optional<std::string>(getenv("HOME")) : std::nullopt;
  const std::optional<std::string> xdg = getenv("XDG_CACHE_HOME")
                                             ? std::optional<std::string>(getenv("XDG_CACHE_HOME"))
                                             : std::nullopt;
  setenv("HOME", home_is_a_file.c_str(), 1);
  unsetenv("XDG_CACHE_HOME");
  setenv("TMPDIR", cache_.c_str(), 1);
  LoaderOptions options;
  options.search_dirs = {FAKE_HOSTILE_DIR};
  options.filter = "fake_entry_crashes";
  const Discovery discovery = DiscoverPlugins(options);
  if (home) setenv("HOME", home->c_str(), 1);
  if (xdg) setenv("XDG_CACHE_HOME", xdg->c_str(), 1);
  unsetenv("TMPDIR");
  EXPECT_NE(RejectionOf(discovery, "fake_entry_crashes"), nullptr);
  const fs::path folder = cache_ / ("chorus-cache-" + std::to_string(::getuid()));
  ASSERT_TRUE(fs::is_directory(folder / "plugin-vetting"));
  EXPECT_EQ(fs::status(folder).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_FALSE(fs::is_empty(folder / "plugin-vetting"));
}

TEST_F(HostilePlugins, WithoutVettingACrashWhileOpeningNamesTheFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("CHORUS_PLUGIN_VETTING", "0", 1);
        std::string reason;
        PluginLibrary::Load(Hostile("fake_entry_crashes"), &reason);
        std::_Exit(0);
      },
      // Killed by SIGSEGV, or ended by AddressSanitizer's report in a sanitizer build.
      [](int status) { return WIFSIGNALED(status) || WEXITSTATUS(status) != 0; },
      "opening the plugin file .*libchorus-fake_entry_crashes.so.*the plugin crashed the "
      "process.*CHORUS_PLUGINS=\\^fake_entry_crashes");
}

TEST_F(HostilePlugins, WithoutVettingAnOpeningThatHangsEndsTheProcessNamingTheFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("CHORUS_PLUGIN_VETTING", "0", 1);
        setenv("CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS", "1", 1);
        std::string reason;
        PluginLibrary::Load(Hostile("fake_entry_hangs"), &reason);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(kWatchdogExitStatus),
      "opening the plugin file .*libchorus-fake_entry_hangs.so .*still has not returned");
}

// What libfabric's psm provider does when it is loaded; a scheduler's SIGTERM must still end the
// process by the signal, with no exit() and no static destructors under live threads.
TEST_F(HostilePlugins, OpeningAPluginLeavesTheSignalHandlingAsItWas) {
  std::string reason;
  auto plugin = PluginLibrary::Load(Hostile("fake_takes_signals"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  struct sigaction term {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &term), 0);
  EXPECT_EQ(term.sa_handler, SIG_DFL);
  bool noted = false;
  for (const auto& note : plugin->notes()) {
    noted =
        noted || note.find("changed how this process handles SIGINT, SIGTERM") != std::string::npos;
  }
  EXPECT_TRUE(noted);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(::raise(SIGTERM), ::testing::KilledBySignal(SIGTERM), "");
}

// Every plugin of the build (the ofi plugin's libfabric among them, with its psm provider).
TEST_F(HostilePlugins, NoPluginOfTheBuildChangesTheSignalHandling) {
  struct sigaction before[NSIG], after[NSIG];
  bool valid[NSIG];
  // The C library keeps some signals for itself (sigaction refuses them).
  for (int s = 1; s < NSIG; ++s) valid[s] = sigaction(s, nullptr, &before[s]) == 0;
  Registry registry(LoaderOptions::FromEnvironment());
  EXPECT_GT(registry.plugins().size(), 1u);
  for (int s = 1; s < NSIG; ++s) {
    if (!valid[s]) continue;
    sigaction(s, nullptr, &after[s]);
    if (s == SIGPIPE && after[s].sa_handler == SIG_IGN) continue;  // kept on purpose
    EXPECT_EQ(after[s].sa_handler, before[s].sa_handler) << "signal " << s << " changed";
  }
}

std::unique_ptr<Communicator> OneRank(const Registry& registry, const std::string& name,
                                      double timeout_seconds) {
  CommunicatorConfig config;
  config.store = MakeInProcessStore();
  config.timeout_seconds = timeout_seconds;
  return Communicator::Create(registry, name, config);
}

TEST_F(HostilePlugins, ACollectiveCallThatNeverReturnsEndsTheProcessNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const Registry registry = Only("fake_call_hangs");
        auto comm = OneRank(registry, "fake_call_hangs", 1);
        float value = 1;
        comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(kWatchdogExitStatus),
      "all_reduce over fake_call_hangs \\(plugin fake_call_hangs .*\\) on rank 0 still has not "
      "returned");
}

TEST_F(HostilePlugins, ACollectiveCallThatReturnsLateFailsNamingThePlugin) {
  const Registry registry = Only("fake_call_late");
  auto comm = OneRank(registry, "fake_call_late", 1);
  float value = 1;
  const auto start = Clock::now();
  try {
    comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
    FAIL() << "an all_reduce that returned after the watchdog's limit succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_TIMEOUT) << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce over fake_call_late (plugin fake_call_late"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("has not returned within 2.0 s"), std::string::npos)
        << e.what();
  }
  // It returned after 3 s: within the 5 s the watchdog gives an aborted call.
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(2900));
}

TEST_F(HostilePlugins, AnExceptionAcrossTheAbiNamesThePluginAndTheCall) {
  const Registry registry = Only("fake_call_throws");
  auto comm = OneRank(registry, "fake_call_throws", 5);
  float value = 1;
  try {
    comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
    FAIL() << "the plugin's exception was lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INTERNAL);
    EXPECT_NE(std::string(e.what()).find(
                  "plugin fake_call_throws (" + Hostile("fake_call_throws") +
                  "): its all_reduce over fake_call_throws threw a C++ exception across the C "
                  "ABI: boom"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(HostilePlugins, ACollectiveTableOfSizeZeroIsIgnoredAndNamed) {
  const Registry registry = Only("fake_size_zero");
  try {
    registry.FindCollective("fake_size_zero", "CHORUS_COMMUNICATION");
    FAIL() << "a table of size 0 was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Plugin fake_size_zero"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has struct_size 0"), std::string::npos) << e.what();
  }
}

TEST_F(HostilePlugins, AScoreOutOfRangeCountsAsZeroAndSaysWhy) {
  const Registry registry = Only("fake_score_out_of_range");
  JobShape shape;
  shape.ranks = 2;
  shape.ranks_per_host = 2;
  const auto args = ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4096, shape, CHORUS_REQUEST_AUTO);
  bool seen = false;
  for (const Ranked& ranked : RankCollectives(registry, args)) {
    if (ranked.name != "fake_score_out_of_range") continue;
    seen = true;
    EXPECT_EQ(ranked.score.value, 0u);
    EXPECT_TRUE(ranked.score.invalid);
    EXPECT_NE(ranked.score.reason.find("declares the score 4294967295"), std::string::npos)
        << ranked.score.reason;
  }
  EXPECT_TRUE(seen);
  // AUTO does not pick it.
  EXPECT_NE(PlanByScores(registry, shape, CHORUS_REQUEST_AUTO).collectives.front(),
            "fake_score_out_of_range");
}

}  // namespace
}  // namespace chorus
