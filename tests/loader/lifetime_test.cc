// A library stays loaded while any handle made from it lives.
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/registry.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

namespace chorus {
namespace {

const std::string kPath = std::string(FAKE_PLUGIN_DIR) + "/libchorus-fake_good.so";

bool Mapped() {
  void* handle = dlopen(kPath.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

TEST(Lifetime, TheLibraryOutlivesTheRegistryWhileAHandleLives) {
  ASSERT_FALSE(Mapped());
  std::unique_ptr<CrossDeviceOps> ops;
  {
    LoaderOptions options;
    options.search_dirs = {FAKE_PLUGIN_DIR};
    options.filter = "fake_good";
    Registry registry(options);
    ASSERT_TRUE(Mapped());
    auto cpu = DeviceEnumerator::Create(registry.FindPlugin("core"), {{"count", "2"}});
    ops = CrossDeviceOps::Create(registry, "fake_good_ops", {{cpu, 0}, {cpu, 1}});
  }
  EXPECT_TRUE(Mapped()) << "unloaded while a cross-device ops handle lives";
  EXPECT_EQ(ops->library().name(), "fake_good");
  ops.reset();
  EXPECT_FALSE(Mapped()) << "still loaded after the last handle went";
}

}  // namespace
}  // namespace chorus
