// The ucx transport's AUTO score and same-host choice (src/transport_path.h): UCX_TLS filtered
// as UCP filters it (checked against what ucp_init enables here), the paths and scores from
// explicit transport lists, the same_host option and CHORUS_UCX_SAME_HOST, the check that sees
// a tcp lane, and the plugin's own score in fresh processes under several environments (the
// score is evaluated once per process).
#include <chorus/base/error.h>
#include <chorus/collective/transport_endpoint.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/plugin_library.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "options.h"
#include "transport_path.h"

extern char** environ;

namespace chorus::ucx {
namespace {

using DeviceType = UcxResource::DeviceType;

// The variable that makes this program the child of PluginScore (the file it writes to).
constexpr const char* kScoreChildVariable = "CHORUS_UCX_TEST_SCORE_FILE";

// A machine with tcp, shared memory and an InfiniBand adapter (as uct_md_query_tl_resources
// lists them on one).
const std::vector<UcxResource> kMachineWithRdma = {
    {"self", "memory0", DeviceType::kSelf},
    {"tcp", "eth0", DeviceType::kNetwork},
    {"tcp", "lo", DeviceType::kNetwork},
    {"sysv", "memory", DeviceType::kSharedMemory},
    {"posix", "memory", DeviceType::kSharedMemory},
    {"cma", "memory", DeviceType::kSharedMemory},
    {"rc_verbs", "mlx5_0:1", DeviceType::kNetwork},
    {"ud_verbs", "mlx5_0:1", DeviceType::kNetwork},
    {"rc_mlx5", "mlx5_0:1", DeviceType::kNetwork},
    {"ud_mlx5", "mlx5_0:1", DeviceType::kNetwork},
    {"dc_mlx5", "mlx5_0:1", DeviceType::kNetwork},
};

// The same without the adapter: what this test machine's UCX lists.
std::vector<UcxResource> MachineWithoutRdma() {
  std::vector<UcxResource> list;
  for (const UcxResource& r : kMachineWithRdma) {
    if (r.device != "mlx5_0:1") list.push_back(r);
  }
  return list;
}

TransportSelection Tls(std::optional<std::string> tls,
                       std::optional<std::string> net_devices = std::nullopt) {
  TransportSelection selection;
  selection.tls = std::move(tls);
  selection.net_devices = std::move(net_devices);
  return selection;
}

// "tcp/eth0 tcp/lo ..." of the resources, in their order.
std::string Names(const std::vector<UcxResource>& resources) {
  std::string text;
  for (const UcxResource& r : resources) {
    text += (text.empty() ? "" : " ") + r.transport + "/" + r.device;
  }
  return text;
}

std::string Enabled(const std::vector<UcxResource>& all, const TransportSelection& selection) {
  return Names(EnabledResources(all, selection));
}

chorus_score_args Shape(int32_t hosts, int32_t ranks_per_host,
                        chorus_implementation_request request = CHORUS_REQUEST_AUTO) {
  chorus_score_args args{};
  args.struct_size = sizeof(args);
  args.op = CHORUS_OP_ALL_REDUCE;
  args.dtype = CHORUS_F32;
  args.bytes = 1 << 20;
  args.hosts = hosts;
  args.ranks_per_host = ranks_per_host;
  args.ranks = ranks_per_host > 0 ? hosts * ranks_per_host : hosts + 1;
  args.memory = "host";
  args.request = request;
  return args;
}

// One host of 2 ranks, 2 hosts of 1 rank, 2 hosts of 2 ranks.
std::vector<uint32_t> Scores(const std::vector<UcxResource>& all, const TransportSelection& tls,
                             SameHostMode mode) {
  const std::vector<UcxResource> enabled = EnabledResources(all, tls);
  return {ScoreFromResources(enabled, mode, Shape(1, 2)),
          ScoreFromResources(enabled, mode, Shape(2, 1)),
          ScoreFromResources(enabled, mode, Shape(2, 2))};
}

using ScoreList = std::vector<uint32_t>;

// ---- UCX_TLS and UCX_*_DEVICES as UCP reads them -----------------------------------------------

TEST(UcxTransportFilter, FollowsUcxTlsNamesAliasesAndExclusions) {
  const auto& all = kMachineWithRdma;
  EXPECT_EQ(Enabled(all, Tls(std::nullopt)), Names(all));
  EXPECT_EQ(Enabled(all, Tls("all")), Names(all));
  EXPECT_EQ(Enabled(all, Tls("tcp")), "tcp/eth0 tcp/lo");
  EXPECT_EQ(Enabled(all, Tls("sm,self")), "self/memory0 sysv/memory posix/memory cma/memory");
  EXPECT_EQ(Enabled(all, Tls("mm")), "sysv/memory posix/memory");
  EXPECT_EQ(Enabled(all, Tls("^sm")),
            "self/memory0 tcp/eth0 tcp/lo rc_verbs/mlx5_0:1 ud_verbs/mlx5_0:1 rc_mlx5/mlx5_0:1 "
            "ud_mlx5/mlx5_0:1 dc_mlx5/mlx5_0:1");
  // rc brings ud only for wire-up (":aux"): no data over it.
  EXPECT_EQ(Enabled(all, Tls("rc")), "rc_verbs/mlx5_0:1 rc_mlx5/mlx5_0:1");
  EXPECT_EQ(Enabled(all, Tls("ud,sm")),
            "sysv/memory posix/memory cma/memory ud_verbs/mlx5_0:1 ud_mlx5/mlx5_0:1");
  EXPECT_EQ(Enabled(all, Tls("\\posix")), "posix/memory");
  EXPECT_EQ(Enabled(all, Tls("posix:aux,sysv")), "sysv/memory");
  EXPECT_EQ(Enabled(all, Tls("")), "");
  // UCX_NET_DEVICES names network devices; shared memory and self pass.
  EXPECT_EQ(Enabled(all, Tls(std::nullopt, "lo")),
            "self/memory0 tcp/lo sysv/memory posix/memory cma/memory");
  EXPECT_EQ(Enabled(all, Tls("rc,tcp", "mlx5_0:1")), "rc_verbs/mlx5_0:1 rc_mlx5/mlx5_0:1");
}

// The resources ucp_init enables for data with UCX_TLS=tls (UCX's own listing,
// ucp_context_print_info: "resource 2  :  md 1  dev 2  flags -- tcp/lo"; flag 'a': wire-up only).
// nullopt when ucp_init refuses the setting.
std::optional<std::string> UcpEnables(const std::string& tls, const std::string& net_devices) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return std::nullopt;
  ucp_config_modify(config, "TLS", tls.c_str());
  ucp_config_modify(config, "NET_DEVICES", net_devices.c_str());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  ucp_context_h context = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (status != UCS_OK) return std::nullopt;
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  ucp_context_print_info(context, stream);
  fclose(stream);
  ucp_cleanup(context);
  std::istringstream lines(std::string(text, length));
  free(text);
  std::set<std::string> enabled;
  for (std::string line; std::getline(lines, line);) {
    const size_t flags = line.find("flags ");
    if (line.find("resource") == std::string::npos || flags == std::string::npos) continue;
    const std::string rest = line.substr(flags + 6);  // "-- tcp/lo" or "a- posix/memory"
    if (rest.size() > 3 && rest[0] != 'a') enabled.insert(rest.substr(3));
  }
  std::string names;
  for (const std::string& name : enabled) names += (names.empty() ? "" : " ") + name;
  return names;
}

TEST(UcxTransportFilter, AgreesWithWhatUcpEnablesHere) {
  const ResourceQuery& query = ProcessResources();
  ASSERT_FALSE(query.error.has_value()) << *query.error;
  for (const std::string tls : {"all", "tcp", "sm,self", "sm", "mm", "^sm", "^tcp,cma", "\\posix",
                                "posix:aux,sysv", "shm,tcp", "ib,tcp", "rc,sm", "^posix,sysv"}) {
    for (const std::string devices : {"all", "lo"}) {
      const std::optional<std::string> ucp = UcpEnables(tls, devices);
      if (!ucp.has_value()) continue;  // UCX refuses to start with it: nothing to compare
      std::set<std::string> ours;
      for (const UcxResource& r : EnabledResources(query.resources, Tls(tls, devices))) {
        ours.insert(r.transport + "/" + r.device);
      }
      std::string names;
      for (const std::string& name : ours) names += (names.empty() ? "" : " ") + name;
      EXPECT_EQ(names, *ucp) << "UCX_TLS=" << tls << " UCX_NET_DEVICES=" << devices;
    }
  }
}

// ---- Paths and scores from explicit inputs -----------------------------------------------------

TEST(UcxPaths, SharedMemoryCarriesAloneOnlyWithoutATcpLaneBesideIt) {
  const auto alone = [](const char* tls) {
    return SharedMemoryCarriesAlone(EnabledResources(kMachineWithRdma, Tls(tls)));
  };
  EXPECT_TRUE(alone("all"));
  EXPECT_TRUE(alone("sm,self"));
  EXPECT_TRUE(alone("posix"));         // no tcp to put beside it
  EXPECT_TRUE(alone("tcp,sysv,cma"));  // cma carries the large messages
  EXPECT_FALSE(alone("tcp,posix"));    // tcp would carry the rendezvous (ucx_info -e -P intra)
  EXPECT_FALSE(alone("tcp,cma"));      // tcp would carry every message
  EXPECT_FALSE(alone("tcp"));
  EXPECT_FALSE(alone("cma,self"));  // nothing carries a message
}

TEST(UcxPaths, EachPathHasItsScore) {
  EXPECT_EQ(PathScore(UcxPath::kSharedMemory), 30u);
  EXPECT_EQ(PathScore(UcxPath::kRdma), 40u);
  EXPECT_EQ(PathScore(UcxPath::kTcp), 8u);
  EXPECT_EQ(PathScore(UcxPath::kNone), 0u);
}

TEST(UcxPaths, ScoresFollowTheTransportsAndTheSameHostMode) {
  const std::vector<UcxResource> here = MachineWithoutRdma();
  const auto shm = SameHostMode::kSharedMemory, peer = SameHostMode::kPeerFailure;
  // {one host, one rank per host, 2 hosts of 2}
  EXPECT_EQ(Scores(here, Tls("tcp"), shm), (ScoreList{8, 8, 8}));
  EXPECT_EQ(Scores(here, Tls("sm,self"), shm), (ScoreList{30, 0, 0}));  // no way off the host
  EXPECT_EQ(Scores(here, Tls(std::nullopt), shm), (ScoreList{30, 8, 8}));
  EXPECT_EQ(Scores(here, Tls(std::nullopt), peer), (ScoreList{8, 8, 8}));
  // UCX refuses peer failure handling over shared memory alone; the endpoint goes without it.
  EXPECT_EQ(Scores(here, Tls("sm,self"), peer), (ScoreList{30, 0, 0}));
  // tcp would carry the large messages: connected with peer failure handling, over tcp.
  EXPECT_EQ(Scores(here, Tls("tcp,posix"), shm), (ScoreList{8, 8, 8}));
  // Only tcp on lo: no way off the host.
  EXPECT_EQ(Scores(here, Tls(std::nullopt, "lo"), shm), (ScoreList{30, 0, 0}));
  EXPECT_EQ(Scores(kMachineWithRdma, Tls(std::nullopt), shm), (ScoreList{30, 40, 30}));
  EXPECT_EQ(Scores(kMachineWithRdma, Tls(std::nullopt), peer), (ScoreList{40, 40, 40}));
  EXPECT_EQ(Scores(kMachineWithRdma, Tls("rc,tcp"), shm), (ScoreList{40, 40, 40}));
  EXPECT_EQ(Scores(kMachineWithRdma, Tls("rc"), shm), (ScoreList{40, 40, 40}));
  EXPECT_EQ(Scores(kMachineWithRdma, Tls("rc", "eth0"), shm), (ScoreList{0, 0, 0}));
}

TEST(UcxPaths, RingAndNcclRequestsScoreZero) {
  const std::vector<UcxResource> enabled = EnabledResources(kMachineWithRdma, Tls(std::nullopt));
  for (auto request : {CHORUS_REQUEST_RING, CHORUS_REQUEST_NCCL}) {
    for (const chorus_score_args& args : {Shape(1, 2, request), Shape(2, 1, request)}) {
      EXPECT_EQ(ScoreFromResources(enabled, SameHostMode::kSharedMemory, args), 0u);
      EXPECT_EQ(ScoreFromPaths(UcxPath::kSharedMemory, UcxPath::kRdma, args), 0u);
    }
  }
  // Uneven hosts (ranks_per_host 0): the slower path.
  EXPECT_EQ(ScoreFromPaths(UcxPath::kSharedMemory, UcxPath::kRdma, Shape(3, 0)), 30u);
}

// ---- same_host: the option and CHORUS_UCX_SAME_HOST --------------------------------------------

// Sets or unsets an environment variable for one scope.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedVariable() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

EndpointOptions Parse(std::vector<std::pair<std::string, std::string>> pairs) {
  std::vector<chorus_option> options;
  for (const auto& [key, value] : pairs) options.push_back({key.c_str(), value.c_str()});
  return ParseOptions(options.data(), options.size(), "");
}

std::string ParseError(std::vector<std::pair<std::string, std::string>> pairs) {
  try {
    Parse(std::move(pairs));
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "";
}

TEST(UcxSameHost, DefaultIsSharedMemoryAndTheOptionOutranksTheVariable) {
  {
    ScopedVariable unset(kSameHostVariable, nullptr);
    EXPECT_EQ(Parse({}).same_host, SameHostMode::kSharedMemory);
    EXPECT_EQ(Parse({{"same_host", "peer_failure"}}).same_host, SameHostMode::kPeerFailure);
  }
  ScopedVariable variable(kSameHostVariable, "peer_failure");
  EXPECT_EQ(Parse({}).same_host, SameHostMode::kPeerFailure);
  EXPECT_EQ(Parse({{"same_host", "shared_memory"}}).same_host, SameHostMode::kSharedMemory);
}

TEST(UcxSameHost, UnknownValueNamesTheVariableOrOptionAndBothValues) {
  {
    ScopedVariable variable(kSameHostVariable, "shm");
    const std::string message = ParseError({});
    EXPECT_NE(message.find("CHORUS_UCX_SAME_HOST='shm'"), std::string::npos) << message;
    EXPECT_NE(message.find("shared_memory"), std::string::npos) << message;
    EXPECT_NE(message.find("peer_failure"), std::string::npos) << message;
    // The option, valid, overrides the bad variable.
    EXPECT_EQ(Parse({{"same_host", "peer_failure"}}).same_host, SameHostMode::kPeerFailure);
  }
  const std::string message = ParseError({{"same_host", "fast"}});
  EXPECT_NE(message.find("option same_host='fast'"), std::string::npos) << message;
  EXPECT_NE(message.find("shared_memory"), std::string::npos) << message;
  EXPECT_NE(message.find("peer_failure"), std::string::npos) << message;
}

// The plugin's create refuses a bad CHORUS_UCX_SAME_HOST with the same words.
TEST(UcxSameHost, PluginCreateRefusesABadVariable) {
  ScopedVariable variable(kSameHostVariable, "sometimes");
  std::string reason;
  const std::shared_ptr<PluginLibrary> plugin = PluginLibrary::Load(CHORUS_UCX_PLUGIN, &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  CKvStore store(MakeInProcessStore());
  TransportConfig config;
  config.store = store.get();
  config.timeout_ms = 20000;
  try {
    TransportEndpoint::Create(plugin, *plugin->transports().at(0), config);
    ADD_FAILURE() << "create accepted CHORUS_UCX_SAME_HOST=sometimes";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT) << e.what();
    EXPECT_NE(std::string(e.what()).find("CHORUS_UCX_SAME_HOST='sometimes' is neither "
                                         "shared_memory"),
              std::string::npos)
        << e.what();
  }
}

// ---- The check that UCX put no tcp lane under a same-host peer ---------------------------------

// Whether UCX, with UCX_TLS=tls and no peer failure handling, gives an endpoint to this very
// worker a tcp lane (the lanes UCX picks for a peer process on this host too: ucx_info -e -P
// intra shows the same).
std::optional<bool> TcpLaneToItself(const char* tls) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return std::nullopt;
  ucp_config_modify(config, "TLS", tls);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  ucp_context_h context = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (status != UCS_OK) return std::nullopt;
  ucp_worker_params_t worker_params{};
  ucp_worker_h worker = nullptr;
  std::optional<bool> uses_tcp;
  if (ucp_worker_create(context, &worker_params, &worker) == UCS_OK) {
    ucp_address_t* address = nullptr;
    size_t length = 0;
    if (ucp_worker_get_address(worker, &address, &length) == UCS_OK) {
      ucp_ep_params_t ep_params{};
      ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ep_params.address = address;
      ucp_ep_h ep = nullptr;
      if (ucp_ep_create(worker, &ep_params, &ep) == UCS_OK) {
        uses_tcp = LanesUseTcp(ep);
        ucp_request_param_t close{};
        close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        close.flags = UCP_EP_CLOSE_FLAG_FORCE;
        void* request = ucp_ep_close_nbx(ep, &close);
        if (UCS_PTR_IS_PTR(request)) {
          while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker);
          ucp_request_free(request);
        }
      }
      ucp_worker_release_address(worker, address);
    }
    ucp_worker_destroy(worker);
  }
  ucp_cleanup(context);
  return uses_tcp;
}

TEST(UcxLanes, ATcpLaneBesideSharedMemoryIsSeen) {
  const std::string here = Names(ProcessResources().resources);
  for (const char* needed : {"tcp/", "posix/", "cma/"}) {
    if (here.find(needed) == std::string::npos) GTEST_SKIP() << "needs tcp, posix, cma: " << here;
  }
  EXPECT_EQ(TcpLaneToItself("tcp,posix"), std::optional<bool>(true));
  EXPECT_EQ(TcpLaneToItself("tcp,posix,cma"), std::optional<bool>(false));
  EXPECT_EQ(TcpLaneToItself("tcp"), std::optional<bool>(true));
}

// ---- The plugin's score, in fresh processes
// ------------------------------------------------------

// The child: loads the plugin and writes its AUTO scores for one host of 2 ranks, 2 hosts of 1
// and 2 hosts of 2 to the file kScoreChildVariable names.
TEST(UcxScoreChild, WritesThePluginsScores) {
  const char* file = std::getenv(kScoreChildVariable);
  if (file == nullptr) GTEST_SKIP() << "the child of UcxPluginScore";
  std::string reason;
  const std::shared_ptr<PluginLibrary> plugin = PluginLibrary::Load(CHORUS_UCX_PLUGIN, &reason);
  ASSERT_NE(plugin, nullptr) << reason;
  const chorus_capabilities* capabilities = plugin->transports().at(0)->capabilities;
  ASSERT_NE(capabilities, nullptr);
  std::ofstream out(file);
  for (const chorus_score_args& args : {Shape(1, 2), Shape(2, 1), Shape(2, 2)}) {
    out << capabilities->score(&args) << " ";
  }
}

// The plugin's scores in a child whose environment is this one without UCX_* and
// CHORUS_UCX_SAME_HOST, plus `variables`.
ScoreList PluginScores(const std::vector<std::string>& variables) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("chorus-ucx-score-" + std::to_string(getpid()));
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string_view text = *variable;
    if (text.starts_with("UCX_") || text.starts_with("CHORUS_UCX_SAME_HOST=")) continue;
    environment.emplace_back(text);
  }
  environment.insert(environment.end(), variables.begin(), variables.end());
  environment.push_back(std::string(kScoreChildVariable) + "=" + file.string());
  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=UcxScoreChild.WritesThePluginsScores";
  std::vector<char*> argv = {self.data(), filter.data(), nullptr};
  // The child's own GoogleTest report stays out of this one's; its stderr (logs) comes through.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t child = 0;
  const int spawned =
      posix_spawn(&child, self.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    ADD_FAILURE() << "posix_spawn failed";
    return {};
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed";
  std::ifstream in(file);
  ScoreList scores;
  for (uint32_t score = 0; in >> score;) scores.push_back(score);
  std::filesystem::remove(file);
  return scores;
}

// Through UCX's real query on this machine, which lists tcp (eth0, lo), posix, sysv, cma and
// self (ucx_info -d) and no RDMA; elsewhere the expectations do not hold, and the test skips.
TEST(UcxPluginScore, FollowsTheEnvironmentThroughUcxsQuery) {
  const std::string here = Names(ProcessResources().resources);
  for (const char* needed : {"tcp/lo", "posix/", "sysv/", "cma/", "self/"}) {
    if (here.find(needed) == std::string::npos) {
      GTEST_SKIP() << "written for a machine with tcp, posix, sysv, cma, self; here: " << here;
    }
  }
  const bool off_host_tcp =
      std::any_of(ProcessResources().resources.begin(), ProcessResources().resources.end(),
                  [](const UcxResource& r) { return r.transport == "tcp" && r.device != "lo"; });
  const bool rdma = std::any_of(
      ProcessResources().resources.begin(), ProcessResources().resources.end(),
      [](const UcxResource& r) { return r.type == DeviceType::kNetwork && r.transport != "tcp"; });
  if (!off_host_tcp || rdma)
    GTEST_SKIP() << "written for tcp on a network device, no RDMA: " << here;
  // {one host, one rank per host, 2 hosts of 2}
  EXPECT_EQ(PluginScores({}), (ScoreList{30, 8, 8}));
  EXPECT_EQ(PluginScores({"CHORUS_UCX_SAME_HOST=shared_memory"}), (ScoreList{30, 8, 8}));
  EXPECT_EQ(PluginScores({"CHORUS_UCX_SAME_HOST=peer_failure"}), (ScoreList{8, 8, 8}));
  EXPECT_EQ(PluginScores({"UCX_TLS=tcp"}), (ScoreList{8, 8, 8}));
  EXPECT_EQ(PluginScores({"UCX_TLS=sm,self"}), (ScoreList{30, 0, 0}));
  EXPECT_EQ(PluginScores({"UCX_TLS=tcp,posix"}), (ScoreList{8, 8, 8}));
  EXPECT_EQ(PluginScores({"UCX_NET_DEVICES=lo"}), (ScoreList{30, 0, 0}));
  EXPECT_EQ(PluginScores({"CHORUS_UCX_SAME_HOST=bogus"}), (ScoreList{0, 0, 0}));
}

}  // namespace
}  // namespace chorus::ucx
