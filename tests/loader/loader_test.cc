// The loader's decision and message for each variant of fake_plugin.cc.
#include <chorus/runtime/plugin_library.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <string>

namespace chorus {
namespace {

std::string FakePath(const std::string& variant) {
  return std::string(FAKE_PLUGIN_DIR) + "/libchorus-" + variant + ".so";
}

// Loads a variant that must be rejected and returns the reason.
std::string RejectionOf(const std::string& variant) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath(variant), &reason);
  EXPECT_EQ(plugin, nullptr) << variant << " was accepted";
  EXPECT_FALSE(reason.empty());
  return reason;
}

TEST(Loader, AcceptsAGoodPlugin) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath("fake_good"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  EXPECT_EQ(plugin->name(), "fake_good");
  EXPECT_EQ(plugin->abi_major(), 1u);
  EXPECT_EQ(plugin->abi_minor(), static_cast<uint32_t>(CHORUS_ABI_MINOR));
  ASSERT_NE(plugin->cross_device_ops(), nullptr);
  EXPECT_STREQ(plugin->cross_device_ops()->name, "fake_good_ops");
  EXPECT_EQ(plugin->collective(), nullptr);
  EXPECT_EQ(plugin->Provides(), std::vector<std::string>{"cross_device_ops(fake_good_ops)"});
}

TEST(Loader, RejectsAnotherMajorVersion) {
  const std::string reason = RejectionOf("fake_other_major");
  EXPECT_NE(reason.find("built for chorus ABI 2." + std::to_string(CHORUS_ABI_MINOR)),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("this core speaks ABI 1.6"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rebuild the plugin"), std::string::npos) << reason;
}

TEST(Loader, UsesANewerMinorThroughTheFieldsItKnows) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath("fake_newer_minor"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  EXPECT_EQ(plugin->abi_minor(), 7u);
  EXPECT_EQ(plugin->table().struct_size, sizeof(chorus_plugin));
  ASSERT_NE(plugin->cross_device_ops(), nullptr);
  ASSERT_EQ(plugin->notes().size(), 1u);
  EXPECT_NE(plugin->notes()[0].find("newer than the core's 1.6: using the 1.6 fields"),
            std::string::npos)
      << plugin->notes()[0];
}

TEST(Loader, TreatsSlotsPastAnOlderTableAsUnsupported) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath("fake_older_minor"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  // The fake has poison pointers behind its struct_size; the core must not have read them.
  EXPECT_EQ(plugin->collective(), nullptr);
  EXPECT_EQ(plugin->algorithm(), nullptr);
  EXPECT_EQ(plugin->transport(), nullptr);
  EXPECT_NE(plugin->cross_device_ops(), nullptr);
  ASSERT_EQ(plugin->notes().size(), 1u);
  EXPECT_NE(plugin->notes()[0].find("treated as unsupported"), std::string::npos);
}

TEST(Loader, RejectsAMissingEntrySymbol) {
  const std::string reason = RejectionOf("fake_no_entry");
  EXPECT_NE(reason.find("does not export chorus_plugin_get()"), std::string::npos) << reason;
}

TEST(Loader, RejectsAFailingInitWithItsMessage) {
  const std::string reason = RejectionOf("fake_init_fails");
  EXPECT_NE(reason.find("init() failed with UNAVAILABLE: no fake device on this machine"),
            std::string::npos)
      << reason;
}

TEST(Loader, SurvivesAnEntryThatThrows) {
  const std::string reason = RejectionOf("fake_entry_throws");
  EXPECT_NE(reason.find("threw a C++ exception across the C ABI: fake entry exploded"),
            std::string::npos)
      << reason;
}

TEST(Loader, RejectsAnEntryReturningNull) {
  const std::string reason = RejectionOf("fake_entry_null");
  EXPECT_NE(reason.find("returned NULL"), std::string::npos) << reason;
}

TEST(Loader, RejectsATableTooSmallToHoldAVersion) {
  const std::string reason = RejectionOf("fake_tiny_table");
  EXPECT_NE(reason.find("too small to hold an ABI version"), std::string::npos) << reason;
}

TEST(Loader, RejectsANullRequiredFunction) {
  const std::string reason = RejectionOf("fake_null_init");
  EXPECT_NE(reason.find("required function 'init' NULL"), std::string::npos) << reason;
}

TEST(Loader, RejectsANameThatDiffersFromTheFileName) {
  const std::string reason = RejectionOf("fake_misnamed");
  EXPECT_NE(reason.find("calls itself 'someone_else'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rename the file to libchorus-someone_else.so"), std::string::npos);
}

TEST(Loader, RejectsAFileThatIsNoSharedLibrary) {
  const std::string reason = RejectionOf("not_a_library");
  EXPECT_EQ(reason,
            "libchorus-not_a_library.so is not an ELF file (it does not start with 0x7f 'E' 'L' "
            "'F'; a text file, a script or a damaged copy?); rebuild or reinstall the plugin, or "
            "remove it from the plugin folders");
}

// Compiled against the frozen 1.0 header (tests/abi/v1_0): a 1.0 table, without capabilities or
// arrays, keeps loading; its collective is chosen by name only.
TEST(Loader, LoadsAPluginBuiltForAbi10) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath("fake_abi_1_0"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  EXPECT_EQ(plugin->abi_major(), 1u);
  EXPECT_EQ(plugin->abi_minor(), 0u);
  ASSERT_NE(plugin->collective(), nullptr);
  EXPECT_STREQ(plugin->collective()->name, "fake_abi_1_0");
  EXPECT_EQ(plugin->collective()->capabilities, nullptr);
  EXPECT_EQ(plugin->collectives().size(), 1u);
  EXPECT_EQ(plugin->Provides(), (std::vector<std::string>{"cross_device_ops(fake_abi_1_0_ops)",
                                                          "collective(fake_abi_1_0)"}));
  EXPECT_TRUE(plugin->extension_types().empty());
}

// A 1.1 table with an array of two collectives and a chain of two extensions of types no core
// knows: both collectives are there (the single pointer is the first), the chain is walked and
// skipped with a note.
TEST(Loader, AcceptsSeveralImplementationsAndSkipsUnknownExtensions) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath("fake_scored"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  ASSERT_EQ(plugin->collectives().size(), 2u);
  EXPECT_STREQ(plugin->collectives()[0]->name, "fake_scored_fast");
  EXPECT_STREQ(plugin->collectives()[1]->name, "fake_scored_plain");
  EXPECT_EQ(plugin->collective(), plugin->collectives()[0]);
  ASSERT_NE(plugin->collectives()[0]->capabilities, nullptr);
  EXPECT_EQ(plugin->collectives()[1]->capabilities, nullptr);
  EXPECT_EQ(plugin->extension_types(), (std::vector<uint32_t>{CHORUS_EXTENSION_VENDOR_FIRST + 1,
                                                              CHORUS_EXTENSION_VENDOR_FIRST + 2}));
  ASSERT_EQ(plugin->notes().size(), 1u);
  EXPECT_NE(plugin->notes()[0].find("extensions 0x10001, 0x10002 are unknown to this core"),
            std::string::npos)
      << plugin->notes()[0];
}

TEST(Loader, KeepsTheFirstOfTwoImplementationsOfOneName) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath("fake_duplicate_names"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  ASSERT_EQ(plugin->collectives().size(), 2u);
  EXPECT_NE(plugin->collectives()[0]->capabilities, nullptr);  // the first of the name
  bool noted = false;
  for (const auto& note : plugin->notes()) {
    noted = noted || note.find(
                         "'fake_duplicate_names_fast' repeats an earlier one's name; "
                         "ignored") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

TEST(Loader, UnusableCapabilitiesMakeTheTableChosenByNameOnly) {
  std::string reason;
  auto plugin = PluginLibrary::Load(FakePath("fake_bad_capabilities"), &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  ASSERT_NE(plugin->collective(), nullptr);
  EXPECT_EQ(plugin->collective()->capabilities, nullptr);
  ASSERT_FALSE(plugin->notes().empty());
  EXPECT_NE(plugin->notes()[0].find("have no score function; it is chosen only by name"),
            std::string::npos)
      << plugin->notes()[0];
}

TEST(Loader, AcceptsSeveralDeviceEnumeratorsAndTheRegistryCreatesEach) {
  LoaderOptions options;
  options.search_dirs = {FAKE_PLUGIN_DIR};
  options.filter = "fake_two_enumerators";
  Registry registry(options);
  const auto plugin = registry.FindPlugin("fake_two_enumerators");
  ASSERT_NE(plugin, nullptr);
  ASSERT_EQ(plugin->device_enumerators().size(), 2u);
  std::vector<std::string> platforms;
  for (const auto& enumerator : registry.DeviceEnumerators()) {
    platforms.push_back(enumerator->platform());
  }
  EXPECT_EQ(platforms, (std::vector<std::string>{"cpu", "fakea", "fakeb"}));
}

// dlopen would hand back the same library, whose init must not run twice: the loader keeps one
// PluginLibrary per file and hands it out again while it lives.
TEST(Loader, LoadingAFileTwiceGivesTheSameLibrary) {
  std::string reason;
  auto first = PluginLibrary::Load(FakePath("fake_good"), &reason);
  auto second = PluginLibrary::Load(FakePath("fake_good"), &reason);
  ASSERT_NE(first, nullptr) << reason;
  EXPECT_EQ(first, second);
}

TEST(Loader, RejectsAMissingFile) {
  const std::string reason = RejectionOf("does_not_exist");
  EXPECT_NE(reason.find("no such file"), std::string::npos) << reason;
}

}  // namespace
}  // namespace chorus
