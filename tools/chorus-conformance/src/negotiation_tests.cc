// Negotiation: the plugin table and every interface table it hands out (each one of the 1.1
// arrays), as plugin.h defines them, and the capabilities of collectives and cross-device ops
// (1.1), algorithms and transports (1.3) with their scores (score_checks.h), with a note for a
// table AUTO never chooses. Checked on the table chorus_plugin_get() returned, not the core's copy
// (the loader drops capabilities it cannot use).
#include <chorus/runtime/loader.h>

#include <filesystem>
#include <iostream>
#include <regex>
#include <set>

#include "score_checks.h"
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
      << interface << " table: its name is NULL or empty; it is what variables select it by: set "
      << "a non-empty name";
  for (const Slot& slot : slots) {
    EXPECT_NE(slot.pointer, nullptr)
        << interface << " table: function '" << slot.name
        << "' is NULL; ABI 1.0 needs all: set it (a function that returns CHORUS_UNSUPPORTED "
           "with a message is allowed)";
  }
}

// The tables of one interface in the plugin's own table: every one of its 1.1 array when the
// table holds a non-empty one, else the single pointer; none when the interface is absent.
template <typename Api>
std::vector<const Api*> RawTables(const chorus_plugin& raw, const Api* chorus_plugin::*single,
                                  size_t single_end, const Api* const* chorus_plugin::*list,
                                  size_t chorus_plugin::*count, size_t list_end) {
  if (raw.struct_size >= list_end && raw.*list != nullptr && raw.*count > 0) {
    return std::vector<const Api*>(raw.*list, raw.*list + raw.*count);
  }
  if (raw.struct_size >= single_end && raw.*single != nullptr) return {raw.*single};
  return {};
}

// A table's name for a test name: its own, or its place in the array.
template <typename Api>
std::string TableName(const Api* table, size_t index, size_t name_end,
                      const char* Api::*name_field) {
  if (table != nullptr && table->struct_size >= name_end && table->*name_field != nullptr &&
      (table->*name_field)[0] != '\0') {
    return table->*name_field;
  }
  return "#" + std::to_string(index);
}

// Registers `test`/<name> running check(table) for every table of one interface, and `test`s
// "List" check of the 1.1 array: no NULL entry, names unique, the single pointer at its first.
template <typename Api, typename Check>
void AddInterfaceTests(const SuitePtr& suite, const char* test, const Api* chorus_plugin::*single,
                       size_t single_end, const Api* const* chorus_plugin::*list,
                       size_t chorus_plugin::*count, size_t list_end, const char* Api::*name_field,
                       size_t name_end, Check check) {
  const chorus_plugin* raw = suite->raw_table();
  if (raw == nullptr) return;
  const auto tables = RawTables(*raw, single, single_end, list, count, list_end);
  for (size_t i = 0; i < tables.size(); ++i) {
    const Api* table = tables[i];
    AddTest("Negotiation", std::string(test) + "/" + TableName(table, i, name_end, name_field),
            [table, check] {
              ASSERT_NE(table, nullptr)
                  << "the 1.1 array holds a NULL table; list only non-NULL tables and set the "
                     "count to their number";
              check(*table);
            });
  }
  if (raw->struct_size < list_end || raw->*list == nullptr || raw->*count == 0) return;
  AddTest("Negotiation", std::string(test) + "List", [tables, raw, single, name_end, name_field] {
    EXPECT_EQ(raw->*single, tables[0])
        << "with a 1.1 array, the single pointer must point at its first table (what a "
           "1.0 core uses); set the single pointer to element 0 of the array";
    std::set<std::string> names;
    for (const Api* table : tables) {
      if (table == nullptr || table->struct_size < name_end || table->*name_field == nullptr) {
        continue;
      }
      EXPECT_TRUE(names.insert(table->*name_field).second)
          << "two tables of one interface are named '" << table->*name_field
          << "'; names must be unique (the core keeps the first): rename one";
    }
  });
}

// A capabilities struct as plugin.h defines it (struct_size, a memory list, ops within
// `known_ops`, a known shape, a score function), then its scores (score_checks.h): failures fail
// the test, notes are printed.
void CheckCapabilities(ScoredKind kind, const char* name, const chorus_capabilities* c,
                       uint32_t known_ops, uint32_t runs_ops, const ScoreReference& reference) {
  const std::string where = std::string(ScoredKindName(kind)) + " '" + name + "': capabilities";
  ASSERT_GE(c->struct_size, CHORUS_STRUCT_SIZE(chorus_capabilities, score))
      << where << ".struct_size " << c->struct_size
      << " is smaller than ABI 1.1's; set struct_size = sizeof(chorus_capabilities)";
  ASSERT_NE(c->memory, nullptr) << where << ".memory is NULL; list \"host\", a platform or \"*\"";
  constexpr size_t kMaxMemoryKinds = 64;
  std::vector<std::string> memory;
  for (size_t i = 0; i < kMaxMemoryKinds && c->memory[i] != nullptr; ++i) {
    memory.emplace_back(c->memory[i]);
  }
  ASSERT_FALSE(memory.empty()) << where
                               << ".memory is empty; list \"host\", a platform or \"*\" before "
                                  "its NULL";
  ASSERT_LT(memory.size(), kMaxMemoryKinds)
      << where << ".memory has no NULL at its end (or " << kMaxMemoryKinds
      << "+ entries); end the array with NULL";
  for (const std::string& m : memory) {
    EXPECT_FALSE(m.empty()) << where << ".memory names \"\"; use \"host\", a platform or \"*\"";
  }
  if (kind != ScoredKind::kTransport) {  // a transport's ops are ignored
    EXPECT_NE(c->ops, 0u) << where
                          << ".ops is 0: it serves nothing; set CHORUS_OP_BIT of each op served, "
                             "or leave capabilities NULL";
    EXPECT_EQ(c->ops & ~known_ops, 0u)
        << where << ".ops has bits (0x" << std::hex << (c->ops & ~known_ops) << std::dec
        << ") of no operation this interface has; set only CHORUS_OP_BIT of its operations";
  }
  EXPECT_TRUE(c->shape == CHORUS_SHAPE_ANY || c->shape == CHORUS_SHAPE_ONE_HOST ||
              c->shape == CHORUS_SHAPE_UNIFORM)
      << where << ".shape " << c->shape
      << " is no chorus_job_shape; use CHORUS_SHAPE_ANY, _ONE_HOST or _UNIFORM";
  ASSERT_NE(c->score, nullptr) << where
                               << ".score is NULL; set a score function (it may return a "
                                  "constant)";
  const ScoreFindings findings = CheckScores(kind, name, *c, runs_ops, reference);
  for (const std::string& failure : findings.failures) ADD_FAILURE() << failure;
  for (const std::string& note : findings.notes) std::cout << "note: " << note << "\n";
}

// A table's capabilities, when it has a capabilities field (1.1; algorithms and transports 1.3)
// and sets it; NULL means it is chosen by name only.
template <typename Api>
const chorus_capabilities* RawCapabilities(const Api& t) {
  if (t.struct_size < CHORUS_STRUCT_SIZE(Api, capabilities)) return nullptr;
  return t.capabilities;
}

// Checks a table's capabilities, or notes that it has none (chosen by name only).
template <typename Api>
void CheckScoresOf(const Suite& suite, ScoredKind kind, const Api& t, uint32_t known_ops,
                   uint32_t runs_ops) {
  const char* name = t.name != nullptr ? t.name : "(NULL)";
  if (const chorus_capabilities* c = RawCapabilities(t)) {
    CheckCapabilities(kind, name, c, known_ops, runs_ops, CoreReference(*suite.core(), kind));
  } else {
    std::cout << "note: " << NoCapabilitiesNote(kind, name) << "\n";
  }
}

// The single pointer and the 1.1 array of one interface, with where each ends in the table.
#define KIT_INTERFACE(field, list, count)                                                \
  &chorus_plugin::field, CHORUS_STRUCT_SIZE(chorus_plugin, field), &chorus_plugin::list, \
      &chorus_plugin::count, CHORUS_STRUCT_SIZE(chorus_plugin, count)
// A table's name field, and where it ends.
#define KIT_NAME(type, field) &type::field, CHORUS_STRUCT_SIZE(type, field)

}  // namespace

void RegisterNegotiationTests(const SuitePtr& suite) {
  AddTest("Negotiation", "PluginTable", [suite] {
    const chorus_plugin* raw = suite->raw_table();
    ASSERT_NE(raw, nullptr) << suite->raw_table_error();
    EXPECT_GE(raw->struct_size, CHORUS_PLUGIN_MIN_SIZE)
        << "chorus_plugin.struct_size is " << raw->struct_size
        << ", smaller than ABI 1.0's required fields (" << CHORUS_PLUGIN_MIN_SIZE
        << "); set struct_size = sizeof(chorus_plugin)";
    EXPECT_EQ(raw->abi_major, static_cast<uint32_t>(CHORUS_ABI_MAJOR))
        << "abi_major must be the CHORUS_ABI_MAJOR of the plugin.h it was built with; set "
           "abi_major = CHORUS_ABI_MAJOR and rebuild against this plugin.h";
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
      EXPECT_NE(slot.pointer, nullptr)
          << "chorus_plugin." << slot.name << " is NULL; ABI 1.0 requires it: set it";
    }
  });

  AddTest("Negotiation", "NameVersionDescription", [suite] {
    const chorus_plugin* raw = suite->raw_table();
    ASSERT_NE(raw, nullptr) << suite->raw_table_error();
    ASSERT_NE(raw->name, nullptr) << "chorus_plugin.name is NULL; set it to the name in "
                                     "libchorus-<name>.so";
    static const std::regex kName("[a-z0-9_-]+");
    EXPECT_TRUE(std::regex_match(raw->name, kName))
        << "name '" << raw->name
        << "' must match [a-z0-9_-]+; rename it (and its file libchorus-<name>.so)";
    EXPECT_NE(raw->version, nullptr) << "chorus_plugin.version is NULL; set a version string";
    EXPECT_NE(raw->description, nullptr)
        << "chorus_plugin.description is NULL; set a one-line description";
  });

  if (!suite->plugin().builtin()) {
    AddTest("Negotiation", "FileName", [suite] {
      const std::string file = std::filesystem::path(suite->plugin().path()).filename().string();
      EXPECT_EQ(file, "libchorus-" + suite->plugin().name() + ".so")
          << "the file must be named libchorus-<name>.so after the table's name, so that "
             "CHORUS_PLUGINS and CHORUS_CROSS_DEVICE_OPS names find it";
      EXPECT_EQ(PluginNameFromFileName(file), suite->plugin().name())
          << "the name taken from file '" << file << "' differs from the table's name; rename "
          << "the file libchorus-" << suite->plugin().name() << ".so";
    });

    AddTest("Negotiation", "EntryPointIsStable", [suite] {
      const chorus_plugin* raw = suite->raw_table();
      ASSERT_NE(raw, nullptr) << suite->raw_table_error();
      ASSERT_NE(raw->name, nullptr) << "chorus_plugin.name is NULL on a second call of "
                                    << CHORUS_PLUGIN_ENTRY_SYMBOL << "(); return the same table";
      EXPECT_STREQ(raw->name, suite->plugin().name().c_str())
          << "a second call of " << CHORUS_PLUGIN_ENTRY_SYMBOL
          << "() returned a table of another name; return one static table, the same every "
             "call";
    });
  }

  AddTest("Negotiation", "LastError", [suite] {
    const chorus_plugin* raw = suite->raw_table();
    ASSERT_NE(raw, nullptr) << suite->raw_table_error();
    ASSERT_GE(raw->struct_size, CHORUS_PLUGIN_MIN_SIZE)
        << "chorus_plugin.struct_size is smaller than ABI 1.0's required fields; set "
           "struct_size = sizeof(chorus_plugin)";
    ASSERT_NE(raw->last_error, nullptr) << "chorus_plugin.last_error is NULL; set it";
    EXPECT_NE(raw->last_error(), nullptr)
        << "last_error() returned NULL; it must return \"\" when there was no error";
  });

  AddInterfaceTests(
      suite, "DeviceEnumeratorTable",
      KIT_INTERFACE(device_enumerator, device_enumerator_list, num_device_enumerators),
      KIT_NAME(chorus_device_enumerator_api, platform), [](const chorus_device_enumerator_api& t) {
        ExpectInterfaceTable(
            "device_enumerator", t.struct_size,
            CHORUS_STRUCT_SIZE(chorus_device_enumerator_api, synchronize), t.platform,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("device_count", t.device_count), MakeSlot("device_info", t.device_info),
             MakeSlot("allocate", t.allocate), MakeSlot("deallocate", t.deallocate),
             MakeSlot("copy", t.copy), MakeSlot("reduce", t.reduce), MakeSlot("divide", t.divide),
             MakeSlot("synchronize", t.synchronize)});
      });
  AddInterfaceTests(
      suite, "CrossDeviceOpsTable",
      KIT_INTERFACE(cross_device_ops, cross_device_ops_list, num_cross_device_ops),
      KIT_NAME(chorus_cross_device_ops_api, name), [suite](const chorus_cross_device_ops_api& t) {
        ExpectInterfaceTable(
            "cross_device_ops", t.struct_size,
            CHORUS_STRUCT_SIZE(chorus_cross_device_ops_api, all_gather), t.name,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("reduce", t.reduce), MakeSlot("batch_reduce", t.batch_reduce),
             MakeSlot("broadcast", t.broadcast), MakeSlot("all_gather", t.all_gather)});
        if (t.struct_size < CHORUS_STRUCT_SIZE(chorus_cross_device_ops_api, all_gather)) return;
        // Reduce-scatter (1.5) only with the function that runs it.
        const bool scatters =
            t.struct_size >= CHORUS_STRUCT_SIZE(chorus_cross_device_ops_api, reduce_scatter) &&
            t.reduce_scatter != nullptr;
        const uint32_t ops =
            kCrossDeviceOps | (scatters ? CHORUS_OP_BIT(CHORUS_OP_REDUCE_SCATTER) : 0u);
        CheckScoresOf(*suite, ScoredKind::kCrossDeviceOps, t, ops, ops);
      });
  AddInterfaceTests(
      suite, "CollectiveTable", KIT_INTERFACE(collective, collective_list, num_collectives),
      KIT_NAME(chorus_collective_api, name), [suite](const chorus_collective_api& t) {
        ExpectInterfaceTable(
            "collective", t.struct_size, CHORUS_STRUCT_SIZE(chorus_collective_api, abort), t.name,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("all_reduce", t.all_reduce), MakeSlot("broadcast", t.broadcast),
             MakeSlot("all_gather", t.all_gather), MakeSlot("reduce_scatter", t.reduce_scatter),
             MakeSlot("barrier", t.barrier), MakeSlot("abort", t.abort)});
        if (t.struct_size < CHORUS_STRUCT_SIZE(chorus_collective_api, abort)) return;
        CheckScoresOf(*suite, ScoredKind::kCollective, t, kKnownOps, kKnownOps);
      });
  AddInterfaceTests(suite, "AlgorithmTable",
                    KIT_INTERFACE(algorithm, algorithm_list, num_algorithms),
                    KIT_NAME(chorus_algorithm_api, name), [suite](const chorus_algorithm_api& t) {
                      ExpectInterfaceTable("algorithm", t.struct_size,
                                           CHORUS_STRUCT_SIZE(chorus_algorithm_api, run), t.name,
                                           {MakeSlot("run", t.run)});
                      if (t.struct_size < CHORUS_STRUCT_SIZE(chorus_algorithm_api, run)) return;
                      EXPECT_NE(t.supported_ops, 0u)
                          << "algorithm table: supported_ops is 0; set CHORUS_OP_BIT of each op "
                             "it runs";
                      EXPECT_EQ(t.supported_ops & ~kKnownOps, 0u)
                          << "algorithm table: supported_ops has bits of no operation of "
                             "plugin.h; set only CHORUS_OP_BIT of chorus_collective_op values";
                      CheckScoresOf(*suite, ScoredKind::kAlgorithm, t, kKnownOps, t.supported_ops);
                    });
  AddInterfaceTests(
      suite, "TransportTable", KIT_INTERFACE(transport, transport_list, num_transports),
      KIT_NAME(chorus_transport_api, name), [suite](const chorus_transport_api& t) {
        ExpectInterfaceTable(
            "transport", t.struct_size, CHORUS_STRUCT_SIZE(chorus_transport_api, abort), t.name,
            {MakeSlot("create", t.create), MakeSlot("destroy", t.destroy),
             MakeSlot("isend", t.isend), MakeSlot("irecv", t.irecv), MakeSlot("abort", t.abort)});
        if (t.struct_size < CHORUS_STRUCT_SIZE(chorus_transport_api, abort)) return;
        CheckScoresOf(*suite, ScoredKind::kTransport, t, kKnownOps, kKnownOps);
      });
}

#undef KIT_NAME
#undef KIT_INTERFACE

}  // namespace chorus::conformance::internal
