#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/runtime/device.h>
#include <gtest/gtest.h>
#include <stdlib.h>

namespace chorus {
namespace {

class Environment : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("CHORUS_CPU_DEVICES");
    unsetenv("CHORUS_TIMEOUT_SECONDS");
  }
};

TEST_F(Environment, CpuDevicesDefaultsToOne) {
  unsetenv("CHORUS_CPU_DEVICES");
  EXPECT_EQ(CpuDeviceCountFromEnvironment(), 1u);
  setenv("CHORUS_CPU_DEVICES", "8", 1);
  EXPECT_EQ(CpuDeviceCountFromEnvironment(), 8u);
}

TEST_F(Environment, ABadCpuDeviceCountNamesTheVariable) {
  for (const char* bad : {"0", "four", "4x", "-2", "100000"}) {
    setenv("CHORUS_CPU_DEVICES", bad, 1);
    try {
      CpuDeviceCountFromEnvironment();
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), std::string("CHORUS_CPU_DEVICES='") + bad +
                                           "' is not an integer in [1, 1024]; fix or unset it");
    }
  }
}

TEST_F(Environment, TimeoutSeconds) {
  EXPECT_EQ(DefaultTimeoutSeconds(), 300.0);
  setenv("CHORUS_TIMEOUT_SECONDS", "2.5", 1);
  EXPECT_EQ(DefaultTimeoutSeconds(), 2.5);
  setenv("CHORUS_TIMEOUT_SECONDS", "soon", 1);
  EXPECT_THROW(DefaultTimeoutSeconds(), Error);
  setenv("CHORUS_TIMEOUT_SECONDS", "0", 1);
  EXPECT_THROW(DefaultTimeoutSeconds(), Error);
}

TEST(SplitList, DropsEmptyPartsAndSpaces) {
  EXPECT_EQ(SplitList(" a, b,,c ,", ','), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(SplitList("", ':').empty());
}

}  // namespace
}  // namespace chorus
