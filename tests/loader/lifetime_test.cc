// A library stays loaded while any handle made from it lives, and mapped when the process exits.
#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/registry.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

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

// At exit the process-wide registry stays (it is never destroyed) and its plugins mapped: a
// thread of a plugin that still runs its code then (this one's init starts one that never ends)
// would fault in unmapped code after a dlclose, and end a clean exit with SIGSEGV.
TEST(Lifetime, AProcessExitsCleanlyWhileAPluginsThreadStillRuns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: Global() built there
  EXPECT_EXIT(
      {
        setenv("CHORUS_PLUGIN_PATH", FAKE_THREAD_DIR, 1);
        setenv("CHORUS_PLUGINS", "fake_thread_at_exit", 1);
        // The exit then lasts long enough for the thread to run again, whatever the scheduler.
        std::atexit([] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
        const bool loaded = Registry::Global().FindPlugin("fake_thread_at_exit") != nullptr;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread is running
        std::exit(loaded ? 7 : 1);
      },
      testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace chorus
