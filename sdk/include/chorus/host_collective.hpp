// chorus SDK: the C table of a collective on host memory whose operations complete before they
// return (*request = NULL), from a C++ class. Header-only; C++17.
//
//   class MyComm {
//    public:
//     explicit MyComm(const chorus_communicator_create_args& args);  // throws sdk::Error
//     void AllReduce(const chorus_all_reduce_args& args);
//     void Broadcast(const chorus_collective_broadcast_args& args);
//     void AllGather(const chorus_collective_all_gather_args& args);
//     void ReduceScatter(const chorus_reduce_scatter_args& args);
//     void Barrier();
//     void Abort();  // from any thread, while another is inside an operation
//   };
//   static const chorus_collective_api kCollective =
//   chorus::sdk::HostCollectiveTable<MyComm>("my");
//
// A plugin that provides nothing but such a collective gets its whole table from
// HostCollectivePlugin<MyComm>(info) (the life cycle of sdk::PluginTable around it):
//
//   extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
//     return chorus::sdk::HostCollectivePlugin<MyComm>(
//         {.plugin_name = "my", .version = "1.0.0", .description = "...",
//          .capabilities = &kCapabilities});
//   }
//
// The wrappers check handles, out-pointers and struct sizes (a create_args from an older minor is
// copied into a zeroed struct of this header's size), reject streams with UNSUPPORTED (host memory
// has none), and turn exceptions into statuses with sdk::Guard. The class checks everything else.
#ifndef CHORUS_HOST_COLLECTIVE_HPP_
#define CHORUS_HOST_COLLECTIVE_HPP_

#include <chorus/plugin.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <string>

namespace chorus::sdk {

template <typename Impl>
class HostCollective {
 public:
  static chorus_status Create(const chorus_communicator_create_args* args,
                              chorus_communicator** out) {
    return Guard([&] {
      if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, Name(), " create: out is NULL");
      *out = nullptr;
      const auto& a = RequireArgs(
          args, CHORUS_STRUCT_SIZE(chorus_communicator_create_args, num_options), "create");
      chorus_communicator_create_args full{};
      std::memcpy(&full, &a, std::min(a.struct_size, sizeof(full)));
      full.struct_size = sizeof(full);
      // The handle is opaque to the core: it is the class's address.
      *out = reinterpret_cast<chorus_communicator*>(new Impl(full));
    });
  }
  static void Destroy(chorus_communicator* comm) { delete Of(comm); }

  static chorus_status AllReduce(chorus_communicator* comm, const chorus_all_reduce_args* args,
                                 chorus_request** request) {
    return Run(comm, args, request, "all_reduce", [](Impl& c, const auto& a) { c.AllReduce(a); });
  }
  static chorus_status Broadcast(chorus_communicator* comm,
                                 const chorus_collective_broadcast_args* args,
                                 chorus_request** request) {
    return Run(comm, args, request, "broadcast", [](Impl& c, const auto& a) { c.Broadcast(a); });
  }
  static chorus_status AllGather(chorus_communicator* comm,
                                 const chorus_collective_all_gather_args* args,
                                 chorus_request** request) {
    return Run(comm, args, request, "all_gather", [](Impl& c, const auto& a) { c.AllGather(a); });
  }
  static chorus_status ReduceScatter(chorus_communicator* comm,
                                     const chorus_reduce_scatter_args* args,
                                     chorus_request** request) {
    return Run(comm, args, request, "reduce_scatter",
               [](Impl& c, const auto& a) { c.ReduceScatter(a); });
  }
  static chorus_status Barrier(chorus_communicator* comm, chorus_request** request) {
    return Guard([&] { Require(comm, request, "barrier").Barrier(); });
  }
  // abort() returns nothing, so a failure in it can only be logged; it must not escape.
  static void Abort(chorus_communicator* comm) {
    if (comm == nullptr) return;
    if (Guard([&] { Of(comm)->Abort(); }) != CHORUS_OK) {
      (void)Guard([] { Log(CHORUS_LOG_WARN, std::string(Name()) + " abort: " + LastError()); });
    }
  }

  static const char*& Name() {
    static const char* name = "collective";
    return name;
  }

 private:
  static Impl* Of(chorus_communicator* comm) { return reinterpret_cast<Impl*>(comm); }

  static Impl& Require(chorus_communicator* comm, chorus_request** request, const char* op) {
    if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, Name(), " ", op, ": request is NULL");
    *request = nullptr;
    if (comm == nullptr) Fail(CHORUS_INVALID_ARGUMENT, Name(), " ", op, ": communicator is NULL");
    return *Of(comm);
  }

  // Checks the arguments up to their stream (which must be NULL when present), then runs `body`.
  template <typename Args, typename Body>
  static chorus_status Run(chorus_communicator* comm, const Args* args, chorus_request** request,
                           const char* op, Body body) {
    return Guard([&] {
      Impl& c = Require(comm, request, op);
      // The name is built only for a message: a call pays no allocation or copy for it.
      const auto what = [op] { return std::string(Name()) + " " + op; };
      if (args == nullptr || args->struct_size < offsetof(Args, stream)) {
        RequireArgs(args, offsetof(Args, stream), what().c_str());
      }
      const Args& a = *args;
      if (a.struct_size >= CHORUS_STRUCT_SIZE(Args, stream) && a.stream != nullptr) {
        Fail(CHORUS_UNSUPPORTED, what(), ": ", Name(),
             " works on host memory and takes no stream; pass NULL");
      }
      body(c, a);
    });
  }
};

// The collective table for `Impl`; `name` (static) is what CHORUS_COMMUNICATION selects and what
// messages start with. Its capabilities (1.1) are NULL: set them on the result.
template <typename Impl>
chorus_collective_api HostCollectiveTable(const char* name) {
  HostCollective<Impl>::Name() = name;
  chorus_collective_api table{};
  table.struct_size = sizeof(table);
  table.name = name;
  table.create = HostCollective<Impl>::Create;
  table.destroy = HostCollective<Impl>::Destroy;
  table.all_reduce = HostCollective<Impl>::AllReduce;
  table.broadcast = HostCollective<Impl>::Broadcast;
  table.all_gather = HostCollective<Impl>::AllGather;
  table.reduce_scatter = HostCollective<Impl>::ReduceScatter;
  table.barrier = HostCollective<Impl>::Barrier;
  table.abort = HostCollective<Impl>::Abort;
  return table;
}

struct HostCollectivePluginInfo {
  const char* plugin_name = nullptr;  // [a-z0-9_-]+: the file is libchorus-<plugin_name>.so
  const char* version = "";
  const char* description = "";
  const char* collective_name = nullptr;  // what CHORUS_COMMUNICATION selects; NULL: plugin_name
#if CHORUS_ABI_MINOR >= 1
  const chorus_capabilities* capabilities = nullptr;  // static; NULL: chosen by name only
#endif
  void (*check_host)(const chorus_host& host) = nullptr;  // as in sdk::PluginTable
};

// The whole table of a plugin whose one interface is the host collective `Impl`. Static
// storage: call it from chorus_plugin_get, with the same info every time.
template <typename Impl>
const chorus_plugin* HostCollectivePlugin(const HostCollectivePluginInfo& info) {
  static const chorus_collective_api collective = [&] {
    chorus_collective_api t = HostCollectiveTable<Impl>(
        info.collective_name != nullptr ? info.collective_name : info.plugin_name);
#if CHORUS_ABI_MINOR >= 1
    t.capabilities = info.capabilities;
#endif
    return t;
  }();
  static const chorus_plugin table = [&] {
    chorus_plugin t =
        PluginTable(info.plugin_name, info.version, info.description, info.check_host);
    t.collective = &collective;
    return t;
  }();
  return &table;
}

}  // namespace chorus::sdk

#endif  // CHORUS_HOST_COLLECTIVE_HPP_
