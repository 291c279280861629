// What every group of checks shares: the plugin under test, its own table, the core's cpu
// devices, and a way to register a test from a lambda.
#ifndef CHORUS_CONFORMANCE_SUITE_H_
#define CHORUS_CONFORMANCE_SUITE_H_

#include <chorus/conformance.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::conformance::internal {

class Suite {
 public:
  Suite(std::shared_ptr<PluginLibrary> plugin, KitOptions options);
  ~Suite();
  Suite(const Suite&) = delete;
  Suite& operator=(const Suite&) = delete;

  PluginLibrary& plugin() const { return *plugin_; }
  const std::shared_ptr<PluginLibrary>& plugin_ptr() const { return plugin_; }
  const KitOptions& options() const { return options_; }

  // The table as chorus_plugin_get() returned it, with the plugin's own struct_size (the
  // PluginLibrary holds a copy padded to the core's layout). nullptr with raw_table_error() set
  // when it cannot be had.
  const chorus_plugin* raw_table() const { return raw_table_; }
  const std::string& raw_table_error() const { return raw_table_error_; }

  // A fresh context of the core's cpu enumerator with `count` devices (host memory, reference
  // kernels): the devices cross-device ops are checked on. Throws chorus::Error.
  std::shared_ptr<DeviceEnumerator> CpuDevices(uint32_t count) const;

  // A fresh context of the plugin's own enumerator with options().enumerator_options, or
  // nullptr after recording a test failure that says why.
  std::shared_ptr<DeviceEnumerator> PluginDevices() const;

  // The calling thread's last_error() of the plugin, "(NULL)" for a NULL pointer.
  std::string LastError() const;

 private:
  std::shared_ptr<PluginLibrary> plugin_;
  KitOptions options_;
  std::unique_ptr<Registry> registry_;  // holds the builtin plugin when testing another one
  std::shared_ptr<PluginLibrary> core_;
  const chorus_plugin* raw_table_ = nullptr;
  std::string raw_table_error_;
  void* dl_handle_ = nullptr;
};

using SuitePtr = std::shared_ptr<const Suite>;

// Registers test `suite`.`name` running `body` (a lambda using gtest assertions).
void AddTest(const std::string& suite, const std::string& name, std::function<void()> body,
             const char* file = __builtin_FILE(), int line = __builtin_LINE());

// Expects `status` to be one of `allowed` and, unless it is CHORUS_OK, the plugin's last_error()
// to hold a message. `what` names the call in the failure message.
void ExpectStatus(const Suite& suite, chorus_status status,
                  const std::vector<chorus_status>& allowed, const std::string& what);

void RegisterNegotiationTests(const SuitePtr& suite);
void RegisterLifecycleTests(const SuitePtr& suite);
void RegisterDeviceEnumeratorTests(const SuitePtr& suite);
void RegisterCrossDeviceOpsTests(const SuitePtr& suite);
void RegisterBadArgumentTests(const SuitePtr& suite);
void RegisterCollectiveTests(const SuitePtr& suite);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_SUITE_H_
