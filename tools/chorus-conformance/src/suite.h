// What every group of checks shares: the plugin under test, its own table, the core's cpu
// devices, and a way to register a test from a lambda.
#ifndef CHORUS_CONFORMANCE_SUITE_H_
#define CHORUS_CONFORMANCE_SUITE_H_

#include <chorus/conformance.h>
#include <chorus/conformance/rank_threads.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "declarations.h"

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
  // How long any wait of a check may take (KitOptions::timeout_ms).
  int64_t timeout_ms() const { return options_.timeout_ms; }

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
  std::shared_ptr<DeviceEnumerator> PluginDevices(size_t enumerator = 0) const;
  // "Name" for a plugin with one enumerator, "Name/<platform>" for enumerator `index` of several.
  std::string EnumeratorTestName(const std::string& name, size_t index) const;

  // The calling thread's last_error() of the plugin, "(NULL)" for a NULL pointer.
  std::string LastError() const;

  // The builtin plugin "core" (its tcp transport carries the Algorithm checks).
  const std::shared_ptr<PluginLibrary>& core() const { return core_; }
  // --require: a "not here" answer to what a table declares fails instead of skipping.
  bool require() const { return options_.require; }
  // Thread mode: ranks as threads; job mode: this process is one rank of the job's store.
  bool job_mode() const { return options_.job_store != nullptr; }

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

// A prefix no other group of ranks of this process uses, the same in every process of a job
// that registered the same checks: "conformance/<n>/".
std::string NextGroupPrefix();

// The plugin answered `status` (UNSUPPORTED or UNAVAILABLE) to `what`, with last_error()
// `message`; `declared`: whether its table declares `what`. Returns the failure to report under
// --require when declared; else throws NotHere saying why, for the check to skip. For rank
// threads.
std::string NotHereOnRank(const Suite& suite, chorus_status status, bool declared,
                          const std::string& what, const std::string& message);
// The same in a test's body: a failure, or a skip saying why. The caller returns after it.
void FailOrSkipNotHere(const Suite& suite, chorus_status status, bool declared,
                       const std::string& what, const std::string& message);

// What the ranks of one check reported.
struct RanksOutcome {
  std::string failures;  // one line per failing rank; "" when none failed
  std::string skipped;   // why a rank could not run the check (a NotHere), "" when all could
};
// Runs body(rank) on `size` rank threads, or only for job_rank on this thread (job mode: the
// other ranks run in other processes). A NotHere a body throws goes to `skipped`; another
// exception, or a message a body returns, to `failures`, naming the rank.
RanksOutcome RunKitRanks(const Suite& suite, int size,
                         const std::function<std::string(int rank)>& body);
// Reports an outcome in a test: its failures, else a skip when a rank skipped. Returns true when
// the test should stop (it failed or skipped).
bool Report(const RanksOutcome& outcome, const std::string& context);

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
void RegisterTransportTests(const SuitePtr& suite);
void RegisterAlgorithmTests(const SuitePtr& suite);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_SUITE_H_
