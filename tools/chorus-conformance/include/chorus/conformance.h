// The chorus conformance kit: GoogleTest checks that a plugin keeps the ABI's promises, for every
// implementation of every interface it provides (sdk/README.md, section 11, lists the suites).
// Ranks of collectives, transports and algorithms run as threads of this process
// (chorus/conformance/rank_threads.h) or, with KitOptions::job_store, one per process.
//
// chorus-conformance is the usual way to run it. A project with tests of its own can also link
// chorus::conformance (after find_package(GTest)) and register the checks in its own main():
//
//   std::string reason;
//   auto plugin = chorus::PluginLibrary::Load("libchorus-mine.so", &reason);
//   testing::InitGoogleTest(&argc, argv);
//   chorus::conformance::RegisterConformanceTests(plugin);
//   return RUN_ALL_TESTS();
#ifndef CHORUS_CONFORMANCE_H_
#define CHORUS_CONFORMANCE_H_

#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/plugin_library.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::conformance {

struct KitOptions {
  // Options handed to the plugin's device enumerator create (e.g. {"count", "4"}).
  Options enumerator_options;
  // Options handed to the plugin's cross-device ops create (e.g. {"num_packs", "2"}).
  Options cross_device_ops_options;
  // Options handed to the plugin's collective create (e.g. {"algorithm", "bcube"}).
  Options collective_options;
  // A job's rendezvous store: the Collective, Transport and Algorithm checks then run with this
  // process as rank job_rank of job_size (every process of the job runs the kit). Without it
  // they run ranks as threads of this process over an in-process store.
  std::shared_ptr<KvStore> job_store;
  int job_rank = 0;
  int job_size = 1;
  // Without it, what the plugin answers UNSUPPORTED or UNAVAILABLE is skipped, saying why. With
  // it, such an answer fails where the table declares what was asked: its capabilities' memory
  // and ops (ABI 1.1), an algorithm's supported_ops, or a function slot that is not NULL (1.0).
  bool require = false;
  // Another plugin whose transports the Algorithm checks also run over (besides the core's
  // tcp); it stays loaded while the tests run.
  std::shared_ptr<PluginLibrary> transport_plugin;
  // How long the kit waits for anything: a create, a request, another rank's key in the store.
  // chorus-conformance sets it from --timeout or CHORUS_TIMEOUT_SECONDS. A check of a rule with
  // a time of its own (plugin.h's transport rules T4 and T5: 5 s) enforces that time instead.
  int64_t timeout_ms = 60000;
};

// Registers, with testing::RegisterTest, every check that applies to `plugin`: negotiation and
// lifecycle always, the others for every implementation of the interfaces it provides. Call
// after testing::InitGoogleTest and before RUN_ALL_TESTS. `plugin` stays loaded while the tests
// run. Suites: Negotiation, Lifecycle, DeviceEnumerator, CrossDeviceOps, BadArguments,
// Collective, Transport, Algorithm.
void RegisterConformanceTests(std::shared_ptr<PluginLibrary> plugin);
void RegisterConformanceTests(std::shared_ptr<PluginLibrary> plugin, const KitOptions& options);

// Lines saying what the kit does not check for this plugin with these options: collectives and
// cross-device ops that declare no memory the kit runs on, algorithms with only the core's tcp
// transport to run over.
std::vector<std::string> Limitations(const PluginLibrary& plugin, const KitOptions& options);
std::vector<std::string> Limitations(const PluginLibrary& plugin);  // with KitOptions{}

}  // namespace chorus::conformance

#endif  // CHORUS_CONFORMANCE_H_
