// The chorus conformance kit: GoogleTest checks that a plugin keeps the ABI's promises.
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
  // A job's rendezvous store: the Collective checks then run with this process as rank
  // job_rank of job_size (every process of the job runs the kit). Without it they run 1, 2, 3
  // and 4 ranks as threads of this process over an in-process store.
  std::shared_ptr<KvStore> job_store;
  int job_rank = 0;
  int job_size = 1;
};

// Registers, with testing::RegisterTest, every check that applies to `plugin`: negotiation and
// lifecycle always, device enumerator and cross-device ops checks when it provides them. Call
// after testing::InitGoogleTest and before RUN_ALL_TESTS. `plugin` stays loaded while the tests
// run. Suites: Negotiation, Lifecycle, DeviceEnumerator, CrossDeviceOps, BadArguments,
// Collective.
void RegisterConformanceTests(std::shared_ptr<PluginLibrary> plugin);
void RegisterConformanceTests(std::shared_ptr<PluginLibrary> plugin, const KitOptions& options);

// Lines saying what the kit does not check for this plugin: algorithm and transport interfaces
// are checked for negotiation only.
std::vector<std::string> Limitations(const PluginLibrary& plugin);

}  // namespace chorus::conformance

#endif  // CHORUS_CONFORMANCE_H_
