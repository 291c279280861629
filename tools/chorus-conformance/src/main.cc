// chorus-conformance: loads one plugin and runs the conformance kit on it.
//
//   chorus-conformance --plugin path/to/libchorus-<name>.so [options] [--gtest_* flags]
//   chorus-conformance --builtin [options] [--gtest_* flags]
//   mpirun -n 3 chorus-conformance --plugin libchorus-mpi.so --ranks-from-environment
//   chorus-conformance --plugin libchorus-<name>.so --require --transport libchorus-<other>.so
//
// Exit status: 0 when every check passed, 1 when one failed, 2 when the plugin could not be
// loaded or the command line is wrong.
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/conformance.h>
#include <chorus/rendezvous/rendezvous.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ranks_as_processes.h"
#include "reference.h"

namespace {

constexpr const char* kUsage =
    "usage: chorus-conformance (--plugin PATH | --builtin) [options] [--gtest_* flags]\n"
    "  --plugin PATH                a plugin file, libchorus-<name>.so\n"
    "  --builtin                    the core's builtin plugin ('core': cpu devices,\n"
    "                               reduction_to_one_device, core_ring, ring and tcp)\n"
    "  --enumerator-option KEY=VAL  handed to the plugin's device enumerator create (repeat);\n"
    "                               --builtin defaults to count=4\n"
    "  --ops-option KEY=VAL         handed to the plugin's cross-device ops create (repeat)\n"
    "  --collective-option KEY=VAL  handed to the plugin's collective create (repeat)\n"
    "  --ranks-from-environment     run the Collective, Transport and Algorithm checks with this\n"
    "                               process as one rank of the job that TF_CONFIG, mpirun,\n"
    "                               torchrun or Slurm describes (start every rank the same way);\n"
    "                               without it they run ranks as threads of this process, then\n"
    "                               as 2, 3 and 4 processes (RanksAsProcesses.*, through\n"
    "                               chorus-launch from the same folder)\n"
    "  --threads-only               no RanksAsProcesses: for a plugin whose ranks come from its\n"
    "                               own launcher (mpirun), run that way with\n"
    "                               --ranks-from-environment instead\n"
    "  --require                    fail, instead of skipping, where the plugin answers\n"
    "                               UNSUPPORTED or UNAVAILABLE for what its tables declare\n"
    "                               (capabilities' memory and ops, supported_ops, slots)\n"
    "  --transport PATH             another plugin file whose transports the Algorithm checks\n"
    "                               run over too (besides the core's tcp)\n"
    "  --timeout SECONDS            the longest any wait of the kit may take: a create, a\n"
    "                               request, another rank (default: CHORUS_TIMEOUT_SECONDS, else\n"
    "                               60); the rank processes get it too. Checks of a rule with a\n"
    "                               time of its own (plugin.h transport rules T4 and T5: 5 s)\n"
    "                               keep that time\n"
    "  --help                       this text, then GoogleTest's flags\n"
    "GoogleTest flags pass through, e.g. --gtest_filter='CrossDeviceOps.*' --gtest_brief=1.\n"
    "The rank processes run the Collective, Transport and Algorithm checks the filter selects,\n"
    "all of them when it selects none (--gtest_filter='RanksAsProcesses.*'): e.g.\n"
    "--gtest_filter='RanksAsProcesses.Ranks2:Transport.Abort*' runs Transport.Abort* as threads,\n"
    "then as 2 processes.\n"
    "CHORUS_CONFORMANCE_SWEEP=short runs the large count only for u8, f16, f32 and f64 with SUM\n"
    "and ranks as processes at 2 and 3 (every other case as in the default full sweep): for\n"
    "sanitizer builds, several times faster.\n";

struct Arguments {
  std::string plugin_path;
  std::string transport_path;
  bool builtin = false;
  bool help = false;
  bool ranks_from_environment = false;
  bool threads_only = false;
  std::string timeout;  // --timeout's text; empty: CHORUS_TIMEOUT_SECONDS, else the default
  chorus::conformance::KitOptions options;
  std::vector<std::string> forwarded;  // what each rank process gets again (RanksAsProcesses)
  std::vector<char*> rest;             // argv[0] and everything for GoogleTest
};

// The kit's time-out in milliseconds from --timeout's `text`, else CHORUS_TIMEOUT_SECONDS, else
// 60 s. Throws chorus::Error naming the flag or the variable when it is not a number of seconds
// above 0 (at most a week).
int64_t TimeoutMs(const std::string& text) {
  constexpr double kDefaultSeconds = 60;
  constexpr double kMostSeconds = 7 * 24 * 3600.0;
  double seconds = kDefaultSeconds;
  if (!text.empty()) {
    char* end = nullptr;
    errno = 0;
    seconds = std::strtod(text.c_str(), &end);
    if (errno != 0 || end == text.c_str() || *end != '\0' || !(seconds > 0) ||
        seconds > kMostSeconds) {
      throw chorus::Error(CHORUS_INVALID_ARGUMENT, "--timeout '" + text +
                                                       "' is not a number of seconds > 0 (at "
                                                       "most a week)");
    }
  } else if (chorus::GetEnv("CHORUS_TIMEOUT_SECONDS")) {
    seconds = chorus::DefaultTimeoutSeconds();  // checks it, naming the variable
  }
  return std::max<int64_t>(1, std::llround(seconds * 1000));
}

// "KEY=VALUE" into options; false when there is no '=' or no key.
bool AddOption(const char* text, chorus::Options* options) {
  const char* equals = std::strchr(text, '=');
  if (equals == nullptr || equals == text) return false;
  options->emplace_back(std::string(text, equals), std::string(equals + 1));
  return true;
}

// Returns false after printing what is wrong.
bool Parse(int argc, char** argv, Arguments* args) {
  args->rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const int first = i;
    const std::string arg = argv[i];
    // The plugin, its options, --require and --transport go to the rank processes too.
    auto forward = [&] {
      args->forwarded.insert(args->forwarded.end(), argv + first, argv + i + 1);
    };
    auto value = [&](const char* flag) -> const char* {
      const std::string prefix = std::string(flag) + "=";
      if (arg.rfind(prefix, 0) == 0) return argv[i] + prefix.size();
      if (i + 1 < argc) return argv[++i];
      std::cerr << "chorus-conformance: " << flag << " needs a value\n";
      return nullptr;
    };
    auto is = [&](const char* flag) {
      return arg == flag || arg.rfind(std::string(flag) + "=", 0) == 0;
    };
    if (arg == "--builtin") {
      args->builtin = true;
      forward();
    } else if (is("--plugin")) {
      const char* v = value("--plugin");
      if (v == nullptr) return false;
      args->plugin_path = v;
      forward();
    } else if (is("--transport")) {
      const char* v = value("--transport");
      if (v == nullptr) return false;
      args->transport_path = v;
      forward();
    } else if (is("--timeout")) {
      const char* v = value("--timeout");
      if (v == nullptr) return false;
      args->timeout = v;
    } else if (arg == "--ranks-from-environment") {
      args->ranks_from_environment = true;
    } else if (arg == "--threads-only") {
      args->threads_only = true;
    } else if (arg == "--require") {
      args->options.require = true;
      forward();
    } else if (is("--enumerator-option") || is("--ops-option") || is("--collective-option")) {
      const bool enumerator = is("--enumerator-option");
      const bool collective = is("--collective-option");
      const char* flag = enumerator   ? "--enumerator-option"
                         : collective ? "--collective-option"
                                      : "--ops-option";
      const char* v = value(flag);
      if (v == nullptr) return false;
      auto* options = enumerator   ? &args->options.enumerator_options
                      : collective ? &args->options.collective_options
                                   : &args->options.cross_device_ops_options;
      if (!AddOption(v, options)) {
        std::cerr << "chorus-conformance: " << flag << " '" << v << "' is not KEY=VALUE\n";
        return false;
      }
      forward();
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      args->help = true;
      args->rest.push_back(argv[i]);
    } else if (arg.rfind("--gtest_", 0) == 0) {
      args->rest.push_back(argv[i]);
    } else {
      std::cerr << "chorus-conformance: unknown argument '" << arg << "'\n" << kUsage;
      return false;
    }
  }
  if (args->help) return true;
  if (args->builtin == !args->plugin_path.empty()) {
    std::cerr << "chorus-conformance: give exactly one of --plugin PATH and --builtin\n" << kUsage;
    return false;
  }
  if (args->builtin && args->options.enumerator_options.empty()) {
    args->options.enumerator_options = {{"count", "4"}};
  }
  try {
    args->options.timeout_ms = TimeoutMs(args->timeout);
  } catch (const chorus::Error& e) {
    std::cerr << "chorus-conformance: " << e.what() << "\n";
    return false;
  }
  return true;
}

// This process's place in the job and the job's store, served by the leader at its address: the
// server it returns to the leader, once destroyed, serves on until every other rank has come and
// left (or the kit's time-out, at least 60 s, passed), so the leader may finish its checks first
// (another rank may be several waits behind it; a rank that died counts as gone). Each rank waits
// for the store up to the kit's time-out, and says hello with its task name. Throws chorus::Error
// naming what is missing.
std::unique_ptr<chorus::TcpStoreServer> JoinJob(chorus::conformance::KitOptions* options) {
  auto resolver = chorus::ResolveClusterFromEnvironment();
  if (!resolver) {
    throw chorus::Error(CHORUS_INVALID_ARGUMENT,
                        "no job found: set TF_CONFIG, or start the ranks with mpirun, torchrun or "
                        "srun");
  }
  options->job_rank = resolver->id_in_cluster();
  options->job_size = resolver->num_workers();
  const std::string leader = resolver->leader_address();
  const auto colon = leader.rfind(':');
  const std::string host = leader.substr(0, colon);
  const auto port = static_cast<uint16_t>(std::stoi(leader.substr(colon + 1)));
  const std::chrono::milliseconds timeout(options->timeout_ms);
  std::unique_ptr<chorus::TcpStoreServer> server;
  if (resolver->is_leader()) {
    const auto linger = std::max<std::chrono::milliseconds>(timeout, std::chrono::seconds(60));
    server = chorus::TcpStoreServer::Start(host, port, linger, options->job_size - 1);
  }
  options->job_store = chorus::ConnectTcpStore(host, port, timeout);
  chorus::AnnounceTcpStoreClient(*options->job_store, resolver->task_name());
  std::cout << "chorus-conformance: rank " << options->job_rank << " of " << options->job_size
            << " (" << resolver->name() << "), store at " << leader << "\n";
  return server;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "nothing" : out;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (!Parse(argc, argv, &args)) return 2;
  int gtest_argc = static_cast<int>(args.rest.size());
  args.rest.push_back(nullptr);
  testing::InitGoogleTest(&gtest_argc, args.rest.data());
  if (args.help) return 0;

  std::shared_ptr<chorus::PluginLibrary> plugin;
  std::unique_ptr<chorus::Registry> registry;  // holds the builtin plugin for --builtin
  try {
    chorus::conformance::internal::ShortSweep();  // a wrong CHORUS_CONFORMANCE_SWEEP ends here
    if (args.builtin) {
      registry = std::make_unique<chorus::Registry>(chorus::LoaderOptions{{}, std::string("none")});
      plugin = registry->FindPlugin(chorus::kBuiltinPluginName);
    } else {
      std::string reason;
      plugin = chorus::PluginLibrary::Load(args.plugin_path, &reason);
      if (!plugin) {
        std::cerr << "chorus-conformance: cannot load " << args.plugin_path << ": " << reason
                  << "\n";
        return 2;
      }
    }
  } catch (const chorus::Error& e) {
    std::cerr << "chorus-conformance: " << e.what() << "\n";
    return 2;
  }
  if (!args.transport_path.empty()) {
    std::string reason;
    args.options.transport_plugin = chorus::PluginLibrary::Load(args.transport_path, &reason);
    if (!args.options.transport_plugin) {
      std::cerr << "chorus-conformance: --transport: cannot load " << args.transport_path << ": "
                << reason << "\n";
      return 2;
    }
    if (args.options.transport_plugin->transports().empty()) {
      std::cerr << "chorus-conformance: --transport: plugin '"
                << args.options.transport_plugin->name() << "' (" << args.transport_path
                << ") provides no transport; it provides "
                << Join(args.options.transport_plugin->Provides()) << "\n";
      return 2;
    }
  }

  std::cout << "chorus-conformance: plugin '" << plugin->name() << "' " << plugin->version()
            << " from " << plugin->path() << ", ABI " << plugin->abi_major() << "."
            << plugin->abi_minor() << " (kit ABI " << CHORUS_ABI_MAJOR << "." << CHORUS_ABI_MINOR
            << "), provides " << Join(plugin->Provides()) << "\n";
  for (const auto& note : plugin->notes()) std::cout << "note: " << note << "\n";
  if (args.options.transport_plugin) {
    std::cout << "note: algorithms also run over plugin '" << args.options.transport_plugin->name()
              << "': " << Join(args.options.transport_plugin->Provides()) << "\n";
  }
  if (args.options.require) {
    std::cout << "note: --require: UNSUPPORTED or UNAVAILABLE for what a table declares fails\n";
  }
  if (args.options.timeout_ms != 60000) {
    std::cout << "note: every wait of the kit ends after " << args.options.timeout_ms / 1000.0
              << " s (" << (args.timeout.empty() ? "CHORUS_TIMEOUT_SECONDS" : "--timeout") << ")\n";
  }
  for (const auto& line : chorus::conformance::Limitations(*plugin, args.options)) {
    std::cout << "note: " << line << "\n";
  }
  if (!args.options.enumerator_options.empty()) {
    std::cout << "note: device enumerator options:";
    for (const auto& [key, value] : args.options.enumerator_options) {
      std::cout << " " << key << "=" << value;
    }
    std::cout << "\n";
  }
  std::cout.flush();

  std::unique_ptr<chorus::TcpStoreServer> server;  // the leader's; goes last, see JoinJob
  if (args.ranks_from_environment) {
    try {
      server = JoinJob(&args.options);
    } catch (const std::exception& e) {
      std::cerr << "chorus-conformance: --ranks-from-environment: " << e.what() << "\n";
      return 2;
    }
  }
  chorus::conformance::RegisterConformanceTests(plugin, args.options);
  if (!args.ranks_from_environment && !args.threads_only) {
    chorus::conformance::RegisterRanksAsProcessesTests(*plugin, args.forwarded,
                                                       args.options.timeout_ms);
  }
  const int result = RUN_ALL_TESTS();
  // The registered checks keep the store; leave it now, so the leader's server need not wait for
  // this process's exit (a plugin may hold the exit up: mpi finalizes in an atexit handler).
  if (args.options.job_store) chorus::LeaveTcpStore(*args.options.job_store);
  return result == 0 ? 0 : 1;
}
