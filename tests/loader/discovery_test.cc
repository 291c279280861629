// Search order, CHORUS_PLUGINS filtering and the registry's selection of cross-device ops.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace chorus {
namespace {

using ::testing::HasSubstr;

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
  EXPECT_EQ(names, (std::vector<std::string>{
                       "fake_abi_1_0", "fake_bad_capabilities", "fake_barrier", "fake_blocking",
                       "fake_duplicate_names", "fake_good", "fake_newer_minor", "fake_older_minor",
                       "fake_scored", "fake_two_enumerators", "fake_unknown", "fake_vendor16",
                       "fake_wire"}));
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
              "^fake_duplicate_names,^fake_scored,^fake_two_enumerators,^fake_barrier,^fake_wire,"
              "^fake_unknown,^fake_vendor16"));
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
    // Every plugin in the folders, not only those the variable let load.
    EXPECT_NE(message.find("plugins found: fake_abi_1_0, fake_bad_capabilities,"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(", fake_good, "), std::string::npos) << message;
    EXPECT_NE(message.find("CHORUS_PLUGIN_PATH"), std::string::npos) << message;
  }
}

TEST(Discovery, AnExclusionOfNoPluginIsAnErrorListingWhatWasFound) {
  try {
    DiscoverPlugins(Options("^fake_goood"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("CHORUS_PLUGINS='^fake_goood' excludes 'fake_goood', but no "
                                   "plugin of that name is in the plugin folders (" FAKE_PLUGIN_DIR
                                   "); plugins found: fake_abi_1_0, "));
    EXPECT_THAT(message, HasSubstr(", fake_good, "));
    EXPECT_THAT(message, HasSubstr(". Fix the name after '^' or remove the entry"));
  }
}

TEST(Discovery, AMissingFileInThePluginListIsAnErrorListingWhatWasFound) {
  try {
    DiscoverPlugins(Options("/missing/path.so"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_NOT_FOUND);
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_PLUGINS='/missing/path.so' names the file "
                                    "/missing/path.so, which does not exist. Fix the path, or "
                                    "name a plugin of the plugin folders (" FAKE_PLUGIN_DIR
                                    "); plugins found: fake_abi_1_0, "));
  }
}

TEST(Discovery, AFolderInThePluginListIsAnError) {
  try {
    DiscoverPlugins(Options(FAKE_PLUGIN_DIR "/"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("names " FAKE_PLUGIN_DIR "/, a folder; CHORUS_PLUGINS names "
                                    "plugins or plugin files, and folders go in "
                                    "CHORUS_PLUGIN_PATH"));
  }
}

// A search-path entry that exists but cannot be listed is skipped with its reason; the other
// folders still load. (Run as root, a folder without permissions is still readable: the shell
// test chorus_info_lists_unreadable_folders covers that case as an unprivileged user.)
TEST(Discovery, AFileOrALinkLoopInTheSearchPathIsSkippedWithItsReason) {
  const std::string scratch =
      ::testing::TempDir() + "chorus_unreadable_" + std::to_string(getpid());
  std::filesystem::create_directories(scratch);
  const std::string file = scratch + "/a_file", loop = scratch + "/loop";
  std::ofstream(file) << "not a folder\n";
  std::filesystem::create_symlink("loop", loop);
  const Discovery discovery = DiscoverPlugins(Options("fake_good", {file, loop, FAKE_PLUGIN_DIR}));
  std::filesystem::remove_all(scratch);
  EXPECT_EQ(LoadedNames(discovery), std::vector<std::string>{"fake_good"});
  ASSERT_EQ(discovery.unreadable_dirs.size(), 2u);
  EXPECT_EQ(discovery.unreadable_dirs[0].path, file);
  EXPECT_EQ(discovery.unreadable_dirs[0].reason,
            "it is a file, and CHORUS_PLUGIN_PATH lists folders: remove it from there (a single "
            "plugin file may be named in CHORUS_PLUGINS instead)");
  EXPECT_EQ(discovery.unreadable_dirs[1].path, loop);
  EXPECT_THAT(discovery.unreadable_dirs[1].reason,
              HasSubstr("it cannot be read (Too many levels of symbolic links); make it a "
                        "readable folder or remove it from CHORUS_PLUGIN_PATH"));
}

TEST(Discovery, AnErrorForAPluginNotFoundNamesTheFoldersSkipped) {
  const std::string file = ::testing::TempDir() + "chorus_not_a_folder_" + std::to_string(getpid());
  std::ofstream(file) << "not a folder\n";
  const Registry registry(Options("fake_good", {file, FAKE_PLUGIN_DIR}));
  std::filesystem::remove(file);
  try {
    registry.FindCollective("shm", "CHORUS_COLLECTIVE");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("which no loaded plugin provides"));
    EXPECT_THAT(e.what(), HasSubstr("The plugin folder " + file + " was skipped: it is a file"));
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
  EXPECT_TRUE(discovery.unreadable_dirs.empty()) << "a folder that does not exist is no problem";
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
