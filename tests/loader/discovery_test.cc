// Search order, CHORUS_PLUGINS filtering and the registry's selection of cross-device ops.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>

namespace chorus {
namespace {

LoaderOptions Options(std::optional<std::string> filter,
                      std::vector<std::string> dirs = {FAKE_PLUGIN_DIR}) {
  LoaderOptions options;
  options.search_dirs = std::move(dirs);
  options.filter = std::move(filter);
  return options;
}

std::vector<std::string> LoadedNames(const Discovery& discovery) {
  std::vector<std::string> names;
  for (const auto& plugin : discovery.loaded) names.push_back(plugin->name());
  return names;
}

bool Rejected(const Discovery& discovery, const std::string& file_part) {
  return std::any_of(discovery.rejected.begin(), discovery.rejected.end(), [&](const Rejection& r) {
    return r.path.find(file_part) != std::string::npos;
  });
}

TEST(Discovery, LoadsTheGoodAndRejectsEachBrokenCandidateWithAReason) {
  const Discovery discovery = DiscoverPlugins(Options(std::nullopt));
  const auto names = LoadedNames(discovery);
  EXPECT_EQ(names,
            (std::vector<std::string>{"fake_abi_1_0", "fake_bad_capabilities", "fake_blocking",
                                      "fake_duplicate_names", "fake_good", "fake_newer_minor",
                                      "fake_older_minor", "fake_scored", "fake_two_enumerators"}));
  for (const char* broken :
       {"fake_other_major", "fake_no_entry", "fake_init_fails", "fake_entry_throws",
        "fake_entry_null", "fake_tiny_table", "fake_null_init", "fake_misnamed", "not_a_library"}) {
    EXPECT_TRUE(Rejected(discovery, std::string("libchorus-") + broken + ".so")) << broken;
  }
  for (const auto& rejection : discovery.rejected) EXPECT_FALSE(rejection.reason.empty());
}

TEST(Discovery, NoneLoadsNothing) {
  const Discovery discovery = DiscoverPlugins(Options("none"));
  EXPECT_TRUE(discovery.loaded.empty());
  EXPECT_TRUE(discovery.rejected.empty());
}

TEST(Discovery, AnAllowListLoadsOnlyThoseNames) {
  const Discovery discovery = DiscoverPlugins(Options("fake_good"));
  EXPECT_EQ(LoadedNames(discovery), std::vector<std::string>{"fake_good"});
  EXPECT_TRUE(discovery.rejected.empty()) << "broken plugins not asked for must not be opened";
}

TEST(Discovery, CaretExcludesAName) {
  const Discovery discovery = DiscoverPlugins(
      Options("^fake_good,^fake_older_minor,^fake_abi_1_0,^fake_bad_capabilities,^fake_blocking,"
              "^fake_duplicate_names,^fake_scored,^fake_two_enumerators"));
  EXPECT_EQ(LoadedNames(discovery), std::vector<std::string>{"fake_newer_minor"});
}

TEST(Discovery, AnExplicitPathIsLoaded) {
  const Discovery discovery =
      DiscoverPlugins(Options(std::string(FAKE_PLUGIN_DIR) + "/libchorus-fake_good.so", {}));
  EXPECT_EQ(LoadedNames(discovery), std::vector<std::string>{"fake_good"});
}

TEST(Discovery, AnUnknownNameIsAnErrorListingWhatWasFound) {
  try {
    DiscoverPlugins(Options("fake_good,no_such_plugin"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    const std::string message = e.what();
    EXPECT_NE(message.find("CHORUS_PLUGINS names no_such_plugin"), std::string::npos) << message;
    EXPECT_NE(message.find("plugins found: fake_good"), std::string::npos) << message;
    EXPECT_NE(message.find("CHORUS_PLUGIN_PATH"), std::string::npos) << message;
  }
}

TEST(Discovery, NoneMixedWithNamesIsAnError) {
  EXPECT_THROW(DiscoverPlugins(Options("none,fake_good")), Error);
}

TEST(Discovery, TheFirstFolderInSearchOrderWins) {
  const Discovery discovery =
      DiscoverPlugins(Options("fake_good", {FAKE_SHADOW_DIR, FAKE_PLUGIN_DIR}));
  ASSERT_EQ(discovery.loaded.size(), 1u);
  EXPECT_NE(discovery.loaded[0]->path().find(FAKE_SHADOW_DIR), std::string::npos);
}

TEST(Discovery, MissingFoldersAreSkipped) {
  const Discovery discovery = DiscoverPlugins(Options(std::nullopt, {"/nonexistent/chorus"}));
  EXPECT_TRUE(discovery.loaded.empty());
  EXPECT_EQ(discovery.searched_dirs, std::vector<std::string>{"/nonexistent/chorus"});
}

TEST(Discovery, PluginNamesComeFromFileNames) {
  EXPECT_EQ(PluginNameFromFileName("libchorus-nccl.so"), "nccl");
  EXPECT_EQ(PluginNameFromFileName("libchorus-.so"), "");
  EXPECT_EQ(PluginNameFromFileName("libfoo.so"), "");
  EXPECT_EQ(PluginNameFromFileName("libchorus-nccl.so.1"), "");
}

class Selection : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("CHORUS_CROSS_DEVICE_OPS"); }
  void TearDown() override { unsetenv("CHORUS_CROSS_DEVICE_OPS"); }
  Registry registry_{Options("fake_good")};
};

// fake_good_ops declares no capabilities (the fake is a 1.0-style table): AUTO never picks it.
TEST_F(Selection, AutoOnCpuIsReductionToOneDevice) {
  const auto selection = SelectCrossDeviceOps(registry_, "", registry_.DefaultDevices());
  EXPECT_EQ(selection.name, "reduction_to_one_device");
  EXPECT_EQ(selection.source.rfind("AUTO: reduction_to_one_device scores 5", 0), 0u)
      << selection.source;
}

TEST_F(Selection, TheVariableBeatsTheDefault) {
  setenv("CHORUS_CROSS_DEVICE_OPS", "fake_good_ops", 1);
  const auto selection = SelectCrossDeviceOps(registry_, "", registry_.DefaultDevices());
  EXPECT_EQ(selection.name, "fake_good_ops");
  EXPECT_EQ(selection.source, "CHORUS_CROSS_DEVICE_OPS");
}

TEST_F(Selection, APluginNameSelectsItsOps) {
  setenv("CHORUS_CROSS_DEVICE_OPS", "fake_good", 1);
  EXPECT_EQ(SelectCrossDeviceOps(registry_, "", registry_.DefaultDevices()).name, "fake_good_ops");
}

TEST_F(Selection, TheConstructorArgumentBeatsTheVariable) {
  setenv("CHORUS_CROSS_DEVICE_OPS", "fake_good_ops", 1);
  const auto selection =
      SelectCrossDeviceOps(registry_, "reduction_to_one_device", registry_.DefaultDevices());
  EXPECT_EQ(selection.name, "reduction_to_one_device");
  EXPECT_EQ(selection.source, "constructor argument");
}

TEST_F(Selection, AnUnknownNameInTheVariableListsTheAvailableNames) {
  setenv("CHORUS_CROSS_DEVICE_OPS", "ncll", 1);
  try {
    SelectCrossDeviceOps(registry_, "", registry_.DefaultDevices());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(),
                 "CHORUS_CROSS_DEVICE_OPS names cross-device ops 'ncll', which no loaded plugin "
                 "provides. Available: reduction_to_one_device, fake_good_ops.");
  }
}

TEST_F(Selection, TheBuiltinIsAlwaysThereEvenWithNoPlugins) {
  Registry bare(Options("none"));
  EXPECT_EQ(bare.CrossDeviceOpsNames(), std::vector<std::string>{"reduction_to_one_device"});
  ASSERT_EQ(bare.plugins().size(), 1u);
  EXPECT_TRUE(bare.plugins()[0]->builtin());
  EXPECT_EQ(bare.CollectiveNames(), std::vector<std::string>{"core_ring"});
}

}  // namespace
}  // namespace chorus
