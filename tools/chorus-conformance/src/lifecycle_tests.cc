// Lifecycle: init after shutdown, and contexts created and destroyed many times over. Leaks
// show up under ASan (CHORUS_SANITIZE=address,undefined), a stale global as a crash or failure.
#include <chorus/base/error.h>

#include "ops_driver.h"
#include "suite.h"

namespace chorus::conformance::internal {
namespace {

constexpr int kInitCycles = 5;
constexpr int kContextCycles = 20;

}  // namespace

void RegisterLifecycleTests(const SuitePtr& suite) {
  // plugin.h: "After shutdown the core may call init again." Nothing of the plugin's is alive
  // here: every test destroys what it created.
  AddTest("Lifecycle", "ShutdownThenInit", [suite] {
    const chorus_plugin& table = suite->plugin().table();
    for (int cycle = 0; cycle < kInitCycles; ++cycle) {
      table.shutdown();
      const chorus_status status = table.init(CoreHost());
      ASSERT_EQ(status, CHORUS_OK) << "init() after shutdown(), cycle " << cycle << ", returned "
                                   << StatusName(status) << ": " << suite->LastError()
                                   << "; shutdown must reset all global state so that init "
                                      "succeeds again";
    }
  });

  if (const auto* api = suite->plugin().device_enumerator()) {
    AddTest("Lifecycle", "DeviceContextCycles", [suite, api] {
      std::vector<chorus_option> options;
      for (const auto& [key, value] : suite->options().enumerator_options) {
        options.push_back({key.c_str(), value.c_str()});
      }
      uint32_t first_count = 0;
      for (int cycle = 0; cycle < kContextCycles; ++cycle) {
        chorus_device_context_create_args args{};
        args.struct_size = sizeof(args);
        args.options = options.data();
        args.num_options = options.size();
        chorus_device_context* context = nullptr;
        const chorus_status status = api->create(&args, &context);
        ASSERT_EQ(status, CHORUS_OK)
            << "device enumerator create, cycle " << cycle << ": " << StatusName(status) << ": "
            << suite->LastError() << "; create must succeed every time once it succeeded";
        ASSERT_NE(context, nullptr) << "create returned OK and a NULL context, cycle " << cycle
                                    << "; set *out to the new context on OK";
        uint32_t count = 0;
        EXPECT_EQ(api->device_count(context, &count), CHORUS_OK)
            << "device_count, cycle " << cycle << ": " << suite->LastError()
            << "; device_count must return CHORUS_OK on a live context";
        if (cycle == 0) first_count = count;
        EXPECT_EQ(count, first_count)
            << "the device count changed between contexts (cycle " << cycle
            << "); with the same options every context must list the same devices";
        api->destroy(context);
      }
    });
  }

  const auto& all_ops = suite->plugin().cross_device_ops_list();
  for (const chorus_cross_device_ops_api* api : all_ops) {
    const std::string name = std::string("CrossDeviceOpsContextCycles") +
                             (all_ops.size() > 1 ? "/" + std::string(api->name) : "");
    AddTest("Lifecycle", name, [suite, api] {
      const auto devices = suite->CpuDevices(4);
      for (int cycle = 0; cycle < kContextCycles; ++cycle) {
        std::unique_ptr<OpsDriver> ops;
        std::string message;
        const chorus_status status =
            OpsDriver::Create(*suite, *api, devices, {0, 1, 2, 3}, &ops, &message);
        if (IsNotHere(status) && cycle == 0) {
          FailOrSkipNotHere(*suite, status, DeclaresAnyOnCpuDevices(*api),
                            "create over 4 of the core's cpu devices", message);
          return;
        }
        ASSERT_EQ(status, CHORUS_OK) << "cross-device ops create over 4 cpu devices, cycle "
                                     << cycle << ": " << StatusName(status) << ": " << message
                                     << "; destroy must release everything so that create "
                                        "succeeds again";
      }
    });
  }
}

}  // namespace chorus::conformance::internal
