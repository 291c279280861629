// Negotiation: the plugin table and every interface table it hands out, as plugin.h defines
// them for ABI 1.0. Checked on the table chorus_plugin_get() returned, not the core's copy.
#include <chorus/runtime/loader.h>

#include <filesystem>
#include <regex>

#include "suite.h"

namespace chorus::conformance::internal {
namespace {

struct Slot {
  const char* name;
  const void* pointer;
};

template <typename Function>
Slot MakeSlot(const char* name, Function* function) {
  return Slot{name, reinterpret_cast<const void*>(function)};
}

// An interface table: at least its ABI 1.0 size, every 1.0 function present, a name.
void ExpectInterfaceTable(const char* interface, size_t struct_size, size_t size_1_0,
                          const char* name, std::initializer_list<Slot> slots) {
  EXPECT_GE(struct_size, size_1_0)
      << interface << " table: struct_size " << struct_size << " is smaller than ABI 1.0's "
      << size_1_0 << " bytes; set struct_size = sizeof(the table)";
  if (struct_size < size_1_0) return;  // later fields are not the plugin's to be read
  EXPECT_TRUE(name != nullptr && name[0] != '\0')
      << interface << " table: its name is NULL or empty; it is what variables select it by";
  for (const Slot& slot : slots) {
    EXPECT_NE(slot.pointer, nullptr)
        << interface << " table: function '" << slot.name << "' is NULL; ABI 1.0 needs all";
  }
}

// Registers one interface's table check when the plugin's table holds the interface.
// `end` is CHORUS_STRUCT_SIZE(chorus_plugin, <the field>): a field past the plugin's
// struct_size is absent.
template <typename Table, typename Check>
void AddInterfaceTest(const SuitePtr& suite, const char* test, const Table* chorus_plugin::*field,
                      size_t end, Check check) {
  const chorus_plugin* raw = suite->raw_table();
  if (raw == nullptr || raw->struct_size < end || raw->*field == nullptr) return;
  const Table* table = raw->*field;
  AddTest("Negotiation", test, [table, check] { check(*table); });
}

#define KIT_INTERFACE(field) &chorus_plugin::field, CHORUS_STRUCT_SIZE(chorus_plugin, field)

}  // namespace

void RegisterNegotiationTests(const SuitePtr& suite) {
  AddTest("Negotiation", "PluginTable", [suite] {
    const chorus_plugin* raw = suite->raw_table();
    ASSERT_NE(raw, nullptr) << suite->raw_table_error();
    EXPECT_GE(raw->struct_size, CHORUS_PLUGIN_MIN_SIZE)
        << "chorus_plugin.struct_size is smaller than ABI 1.0's required fields";
    EXPECT_EQ(raw->abi_major, static_cast<uint32_t>(CHORUS_ABI_MAJOR))
        << "abi_major must be the CHORUS_ABI_MAJOR of the plugin.h it was built with";
    if (raw->abi_minor > CHORUS_ABI_MINOR) {
      std::cout << "note: the plugin is built for ABI " << raw->abi_major << "." << raw->abi_minor
                << "; this kit checks the ABI " << CHORUS_ABI_MAJOR << "." << CHORUS_ABI_MINOR
                << " fields only\n";
    }
    if (raw->struct_size < CHORUS_PLUGIN_MIN_SIZE) return;
    for (const Slot& slot :
         {MakeSlot("init", raw->init), MakeSlot("shutdown", raw->shutdown),
          MakeSlot("last_error", raw->last_error), MakeSlot("request_test", raw->request_test),
          MakeSlot("request_wait", raw->request_wait),
          MakeSlot("request_free", raw->request_free)}) {
      EXPECT_NE(slot.pointer, nullptr) << "chorus_plugin." << slot.name << " is NULL";
    }
  });

  AddTest("Negotiation", "NameVersionDescription", [suite] {
    const chorus_plugin* raw = suite->raw_table();
    ASSERT_NE(raw, nullptr) << suite->raw_table_error();
    ASSERT_NE(raw->name, nullptr) << "chorus_plugin.name is NULL";
    static const std::regex kName("[a-z0-9_-]+");
    EXPECT_TRUE(std::regex_match(raw->name, kName))
        << "name '" << raw->name << "' must match [a-z0-9_-]+";
    EXPECT_NE(raw->version, nullptr) << "chorus_plugin.version is NULL";
    EXPECT_NE(raw->description, nullptr) << "chorus_plugin.description is NULL";
  });

  if (!suite->plugin().builtin()) {
    AddTest("Negotiation", "FileName", [suite] {
      const std::string file = std::filesystem::path(suite->plugin().path()).filename().string();
      EXPECT_EQ(file, "libchorus-" + suite->plugin().name() + ".so")
          << "the file must be named libchorus-<name>.so after the table's name, so that "
             "CHORUS_PLUGINS and CHORUS_CROSS_DEVICE_OPS names find it";
      EXPECT_EQ(PluginNameFromFileName(file), suite->plugin().name());
    });

    AddTest("Negotiation", "EntryPointIsStable", [suite] {
      const chorus_plugin* raw = suite->raw_table();
      ASSERT_NE(raw, nullptr) << suite->raw_table_error();
      ASSERT_NE(raw->name, nullptr);
      EXPECT_STREQ(raw->name, suite->plugin().name().c_str())
          << "a second call of " << CHORUS_PLUGIN_ENTRY_SYMBOL
          << "() returned a table of another name";
    });
  }

  AddTest("Negotiation", "LastError", [suite] {
    const chorus_plugin* raw = suite->raw_table();
    ASSERT_NE(raw, nullptr) << suite->raw_table_error();
    ASSERT_GE(raw->struct_size, CHORUS_PLUGIN_MIN_SIZE);
    ASSERT_NE(raw->last_error, nullptr) << "chorus_plugin.last_error is NULL";
    EXPECT_NE(raw->last_error(), nullptr)
        << "last_error() returned NULL; it must return \"\" when there was no error";
  });

  AddInterfaceTest(
      suite, "DeviceEnumeratorTable", KIT_INTERFACE(device_enumerator),
      [](const chorus_device_enumerator_api& t) {
        ExpectInterfaceTable(
            "device_enumerator", t.struct_size,
            CHORUS_STRUCT_SIZE(chorus_device_enumerator_api, synchronize), t.platform,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("device_count", t.device_count), MakeSlot("device_info", t.device_info),
             MakeSlot("allocate", t.allocate), MakeSlot("deallocate", t.deallocate),
             MakeSlot("copy", t.copy), MakeSlot("reduce", t.reduce), MakeSlot("divide", t.divide),
             MakeSlot("synchronize", t.synchronize)});
      });
  AddInterfaceTest(
      suite, "CrossDeviceOpsTable", KIT_INTERFACE(cross_device_ops),
      [](const chorus_cross_device_ops_api& t) {
        ExpectInterfaceTable(
            "cross_device_ops", t.struct_size,
            CHORUS_STRUCT_SIZE(chorus_cross_device_ops_api, all_gather), t.name,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("reduce", t.reduce), MakeSlot("batch_reduce", t.batch_reduce),
             MakeSlot("broadcast", t.broadcast), MakeSlot("all_gather", t.all_gather)});
      });
  AddInterfaceTest(
      suite, "CollectiveTable", KIT_INTERFACE(collective), [](const chorus_collective_api& t) {
        ExpectInterfaceTable(
            "collective", t.struct_size, CHORUS_STRUCT_SIZE(chorus_collective_api, abort), t.name,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("all_reduce", t.all_reduce), MakeSlot("broadcast", t.broadcast),
             MakeSlot("all_gather", t.all_gather), MakeSlot("reduce_scatter", t.reduce_scatter),
             MakeSlot("barrier", t.barrier), MakeSlot("abort", t.abort)});
      });
  AddInterfaceTest(suite, "AlgorithmTable", KIT_INTERFACE(algorithm),
                   [](const chorus_algorithm_api& t) {
                     ExpectInterfaceTable("algorithm", t.struct_size,
                                          CHORUS_STRUCT_SIZE(chorus_algorithm_api, run), t.name,
                                          {MakeSlot("run", t.run)});
                     if (t.struct_size < CHORUS_STRUCT_SIZE(chorus_algorithm_api, run)) return;
                     constexpr uint32_t kKnownOps = (1u << (CHORUS_OP_BARRIER + 1)) - 1;
                     EXPECT_NE(t.supported_ops, 0u)
                         << "algorithm table: supported_ops is 0 (set CHORUS_OP_BIT of each op)";
                     EXPECT_EQ(t.supported_ops & ~kKnownOps, 0u)
                         << "algorithm table: supported_ops has bits of no ABI 1.0 operation";
                   });
  AddInterfaceTest(
      suite, "TransportTable", KIT_INTERFACE(transport), [](const chorus_transport_api& t) {
        ExpectInterfaceTable(
            "transport", t.struct_size, CHORUS_STRUCT_SIZE(chorus_transport_api, abort), t.name,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("isend", t.isend), MakeSlot("irecv", t.irecv), MakeSlot("abort", t.abort)});
      });
}

#undef KIT_INTERFACE

}  // namespace chorus::conformance::internal
