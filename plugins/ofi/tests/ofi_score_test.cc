// The ofi transport's AUTO score (src/provider_score.h): from explicit provider names, and the
// plugin's own in fresh processes under FI_PROVIDER (the score finds its provider once per
// process), where the default's score must not load libfabric.
#include <chorus/runtime/plugin_library.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "provider_score.h"

extern char** environ;

namespace chorus::ofi {
namespace {

chorus_score_args Shape(int32_t hosts, int32_t ranks_per_host,
                        chorus_implementation_request request = CHORUS_REQUEST_AUTO) {
  chorus_score_args args{};
  args.struct_size = sizeof(args);
  args.op = CHORUS_OP_ALL_REDUCE;
  args.dtype = CHORUS_F32;
  args.bytes = 1 << 20;
  args.hosts = hosts;
  args.ranks_per_host = ranks_per_host;
  args.ranks = hosts * ranks_per_host;
  args.memory = "host";
  args.request = request;
  return args;
}

using ScoreList = std::vector<uint32_t>;

// One host of 2 ranks, 2 hosts of 1 rank, 2 hosts of 2 ranks.
ScoreList Scores(std::string_view provider) {
  return {ScoreOfProvider(provider, Shape(1, 2)), ScoreOfProvider(provider, Shape(2, 1)),
          ScoreOfProvider(provider, Shape(2, 2))};
}

TEST(OfiScore, FollowsTheProvidersPath) {
  for (const char* sockets : {"tcp;ofi_rxm", "tcp", "sockets", "udp;ofi_rxd", "udp"}) {
    EXPECT_EQ(PathOfProvider(sockets), ProviderPath::kSockets) << sockets;
    EXPECT_EQ(Scores(sockets), (ScoreList{8, 8, 8})) << sockets;
  }
  EXPECT_EQ(PathOfProvider("shm"), ProviderPath::kSharedMemory);
  EXPECT_EQ(Scores("shm"), (ScoreList{30, 0, 0}));  // shm reaches no other host
  for (const char* fabric :
       {"verbs;ofi_rxm", "verbs", "efa", "psm2", "psm3", "cxi", "opx", "ucx", "verbs;ofi_rxd"}) {
    EXPECT_EQ(PathOfProvider(fabric), ProviderPath::kFabric) << fabric;
    EXPECT_EQ(Scores(fabric), (ScoreList{40, 40, 40})) << fabric;
  }
  EXPECT_EQ(Scores("someday"), (ScoreList{8, 8, 8}));  // unknown: general, not faster
}

TEST(OfiScore, RingAndNcclRequestsScoreZero) {
  for (auto request : {CHORUS_REQUEST_RING, CHORUS_REQUEST_NCCL}) {
    for (const char* provider : {"tcp;ofi_rxm", "shm", "verbs"}) {
      EXPECT_EQ(ScoreOfProvider(provider, Shape(1, 2, request)), 0u) << provider;
      EXPECT_EQ(ScoreOfProvider(provider, Shape(2, 1, request)), 0u) << provider;
    }
  }
}

TEST(OfiScore, SocketProvidersAreKnownWithoutLibfabric) {
  for (const char* name : {"tcp;ofi_rxm", "tcp", "sockets", "udp;ofi_rxd", "tcp,sockets"}) {
    EXPECT_TRUE(SocketsOnly(name)) << name;
  }
  for (const char* name : {"shm", "verbs;ofi_rxm", "^shm", "tcp,shm", "", "efa"}) {
    EXPECT_FALSE(SocketsOnly(name)) << name;
  }
}

// The child: prints the plugin's AUTO scores (as Scores) and whether libfabric is loaded after
// them.
int PrintPluginScores() {
  std::string reason;
  const auto plugin = PluginLibrary::Load(CHORUS_OFI_PLUGIN_PATH, &reason);
  if (plugin == nullptr || plugin->transports().empty()) {
    std::cerr << "cannot load " << CHORUS_OFI_PLUGIN_PATH << ": " << reason << "\n";
    return 1;
  }
  const chorus_capabilities* capabilities = plugin->transports().front()->capabilities;
  for (const chorus_score_args& args : {Shape(1, 2), Shape(2, 1), Shape(2, 2)}) {
    std::cout << capabilities->score(&args) << " ";
  }
  const bool loaded = dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr;
  std::cout << (loaded ? "loaded" : "not-loaded") << "\n";
  return 0;
}

// The child's output with FI_PROVIDER=provider (nullptr: unset).
std::string PluginScores(const char* provider) {
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    if (!std::string_view(*variable).starts_with("FI_PROVIDER=")) environment.push_back(*variable);
  }
  if (provider != nullptr) environment.push_back(std::string("FI_PROVIDER=") + provider);
  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) return "pipe failed";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_ends[0]);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string flag = "--print-plugin-scores";
  std::vector<char*> argv = {self.data(), flag.data(), nullptr};
  pid_t child = 0;
  const int spawned =
      posix_spawn(&child, self.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_ends[1]);
  std::string output;
  char buffer[256];
  for (ssize_t n; (n = read(pipe_ends[0], buffer, sizeof buffer)) > 0;) output.append(buffer, n);
  close(pipe_ends[0]);
  if (spawned != 0) return "posix_spawn failed";
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) output += " (the child failed)";
  while (!output.empty() && output.back() == '\n') output.pop_back();
  return output;
}

TEST(OfiPluginScore, FollowsFiProvider) {
  // The default, tcp;ofi_rxm, is scored without loading libfabric.
  EXPECT_EQ(PluginScores(nullptr), "8 8 8 not-loaded");
  EXPECT_EQ(PluginScores("tcp"), "8 8 8 not-loaded");
  EXPECT_EQ(PluginScores("tcp;ofi_rxm"), "8 8 8 not-loaded");
  // shm: libfabric confirms the provider serves here.
  EXPECT_EQ(PluginScores("shm"), "30 0 0 loaded");
  EXPECT_EQ(PluginScores("nosuch"), "0 0 0 loaded");
  if (!std::filesystem::exists("/sys/class/infiniband")) {
    EXPECT_EQ(PluginScores("verbs"), "0 0 0 loaded");  // no adapter: create would fail
  }
}

}  // namespace
}  // namespace chorus::ofi

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--print-plugin-scores") == 0) {
    return chorus::ofi::PrintPluginScores();
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
