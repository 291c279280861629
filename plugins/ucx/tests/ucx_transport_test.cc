// The ucx transport beyond what the conformance kit checks: its options, its tag layout, UCX
// without a usable transport, several threads on one endpoint, and a peer killed with SIGKILL
// during a receive, of a small message or amid large ones (a real second process; the time to
// PEER_LOST is printed, not asserted beyond the kit's "within 5 s").
#include <chorus/base/error.h>
#include <chorus/collective/transport_endpoint.h>
#include <chorus/conformance/rank_threads.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/rendezvous/rendezvous.h>
#include <chorus/runtime/plugin_library.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace chorus {
namespace {

using conformance::EndpointGroup;
using conformance::PluginRequest;
using Clock = std::chrono::steady_clock;

constexpr int64_t kTimeoutMs = 20000;
// The environment variable that turns this binary into the peer of KilledPeer (its store folder).
constexpr const char* kChildStoreVariable = "CHORUS_UCX_TEST_PEER_STORE";

std::shared_ptr<PluginLibrary> LoadUcx() {
  std::string reason;
  std::shared_ptr<PluginLibrary> plugin = PluginLibrary::Load(CHORUS_UCX_PLUGIN, &reason);
  if (!plugin) throw Error(CHORUS_NOT_FOUND, "cannot load " CHORUS_UCX_PLUGIN ": " + reason);
  return plugin;
}

const chorus_transport_api& UcxApi(const PluginLibrary& plugin) {
  return *plugin.transports().at(0);
}

// Creates the endpoint of a job of one rank with `options`; the failure's status and message.
std::pair<chorus_status, std::string> CreateAlone(const Options& options) {
  const std::shared_ptr<PluginLibrary> plugin = LoadUcx();
  CKvStore store(MakeInProcessStore());
  TransportConfig config;
  config.store = store.get();
  config.timeout_ms = kTimeoutMs;
  config.options = options;
  try {
    TransportEndpoint::Create(plugin, UcxApi(*plugin), config);
    return {CHORUS_OK, ""};
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
}

TEST(UcxOptions, UnknownOptionIsRefusedNamingTheKnownOnes) {
  const auto [status, message] = CreateAlone({{"colour", "red"}});
  EXPECT_EQ(status, CHORUS_INVALID_ARGUMENT) << message;
  EXPECT_NE(message.find("unknown option 'colour'"), std::string::npos) << message;
  EXPECT_NE(message.find("tls, net_devices"), std::string::npos) << message;
}

TEST(UcxOptions, BadSpinOrYieldIsRefused) {
  for (const char* key : {"spin_us", "yield_us"}) {
    const auto [status, message] = CreateAlone({{key, "soon"}});
    EXPECT_EQ(status, CHORUS_INVALID_ARGUMENT) << message;
    EXPECT_NE(message.find(key), std::string::npos) << message;
  }
}

// No InfiniBand here: UCX opens nothing for rc, and says so in its words.
TEST(UcxUnavailable, TlsOptionNamingNothingUsableIsUnavailable) {
  const auto [status, message] = CreateAlone({{"tls", "rc"}});
  EXPECT_EQ(status, CHORUS_UNAVAILABLE) << message;
  EXPECT_NE(message.find("UCX_TLS=rc (option)"), std::string::npos) << message;
  EXPECT_NE(message.find("ucp_init: No such device"), std::string::npos) << message;
  EXPECT_NE(message.find("ucx_info -d"), std::string::npos) << message;
}

// Run by CTest with UCX_TLS=rc in the environment (skipped otherwise).
TEST(UcxUnavailable, UcxTlsVariableNamingNothingUsableIsUnavailable) {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr || std::string(tls) != "rc") GTEST_SKIP() << "needs UCX_TLS=rc";
  const auto [status, message] = CreateAlone({});
  EXPECT_EQ(status, CHORUS_UNAVAILABLE) << message;
  EXPECT_NE(message.find("UCX_TLS=rc"), std::string::npos) << message;
  EXPECT_NE(message.find("No such device"), std::string::npos) << message;
}

// With shared memory alone UCX refuses peer error handling; the plugin connects the host's peers
// without it at once instead of asking, which made UCX print "UCX  ERROR ... no peer failure
// handler" at every job's start.
TEST(UcxSharedMemory, ConnectsWithoutAnErrorFromUcx) {
  auto plugin = LoadUcx();
  TransportConfig config;
  config.timeout_ms = kTimeoutMs;
  config.options = {{"tls", "sm,self"}};
  // UCX logs to stdout unless UCX_LOG_FILE says otherwise; both streams are caught.
  char path[] = "/tmp/chorus_ucx_output_XXXXXX";
  const int log = mkstemp(path);
  ASSERT_GE(log, 0);
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
  dup2(log, STDOUT_FILENO);
  dup2(log, STDERR_FILENO);
  std::string error;
  {
    EndpointGroup group(plugin, UcxApi(*plugin), 2, config);
    error = group.CreateError();
  }
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  close(saved_out);
  close(saved_err);
  close(log);
  std::ifstream in(path);
  const std::string printed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  EXPECT_EQ(error, "");
  EXPECT_EQ(printed.find("UCX  ERROR"), std::string::npos) << printed;
}

// Two ranks as threads, endpoints created (and destroyed) at once.
class TwoRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = LoadUcx();
    TransportConfig config;
    config.timeout_ms = kTimeoutMs;
    group_ = std::make_unique<EndpointGroup>(plugin_, UcxApi(*plugin_), 2, config);
    ASSERT_EQ(group_->CreateError(), "");
  }
  TransportEndpoint& endpoint(int rank) { return *group_->endpoint(rank); }

  std::shared_ptr<PluginLibrary> plugin_;
  std::unique_ptr<EndpointGroup> group_;
};

TEST_F(TwoRanks, TagThatDoesNotFitIsRefused) {
  const uint64_t tag = uint64_t{1} << 40;  // bit 40: in the range the layout drops
  uint64_t data = 0;
  PluginRequest request;
  EXPECT_EQ(conformance::StartSend(endpoint(0), 1, tag, &data, sizeof data, &request),
            CHORUS_INVALID_ARGUMENT);
  const std::string message = plugin_->LastError();
  EXPECT_NE(message.find("does not fit"), std::string::npos) << message;
  EXPECT_NE(message.find("0x0000010000000000"), std::string::npos) << message;
  EXPECT_EQ(conformance::StartReceive(endpoint(1), 0, tag, &data, sizeof data, &request),
            CHORUS_INVALID_ARGUMENT);
}

// The core's ring marks its tags in the top byte: those, and small tags, must map to distinct
// UCP tags. Sent in one order, received in the reverse one, each must get its own content.
TEST_F(TwoRanks, MarkedTagsAndSmallTagsStayApart) {
  const std::vector<uint64_t> tags = {1, (uint64_t{0x52} << 56) | 1, (uint64_t{0x53} << 56) | 1,
                                      (uint64_t{1} << 36) - 1};
  std::vector<uint64_t> sent(tags.size()), received(tags.size(), 0);
  std::vector<PluginRequest> sends(tags.size()), receives(tags.size());
  for (size_t i = 0; i < tags.size(); ++i) {
    sent[i] = 1000 + i;
    ASSERT_EQ(conformance::StartSend(endpoint(0), 1, tags[i], &sent[i], 8, &sends[i]), CHORUS_OK)
        << plugin_->LastError();
  }
  for (size_t i = tags.size(); i-- > 0;) {
    ASSERT_EQ(conformance::StartReceive(endpoint(1), 0, tags[i], &received[i], 8, &receives[i]),
              CHORUS_OK)
        << plugin_->LastError();
    std::string message;
    ASSERT_EQ(receives[i].Wait(kTimeoutMs, &message), CHORUS_OK) << message;
    EXPECT_EQ(received[i], sent[i]) << "tag " << tags[i];
  }
  for (auto& send : sends) EXPECT_EQ(send.Wait(kTimeoutMs), CHORUS_OK);
}

// Sizes past UCX's eager limit go by rendezvous: a mismatch there fails the receive too, naming
// both counts, each way. The send may stay pending (plugin.h promises nothing there): abort ends
// it.
TEST_F(TwoRanks, RendezvousSizeMismatchFailsTheReceiveNamingBothCounts) {
  constexpr size_t kSent = size_t{2} << 20;
  for (size_t receive_bytes : {kSent / 2, kSent * 2}) {
    SCOPED_TRACE(receive_bytes);
    std::vector<uint8_t> out(kSent, 7), in(receive_bytes);
    const uint64_t tag = receive_bytes;  // one tag per case
    PluginRequest send, receive;
    ASSERT_EQ(conformance::StartReceive(endpoint(1), 0, tag, in.data(), in.size(), &receive),
              CHORUS_OK);
    ASSERT_EQ(conformance::StartSend(endpoint(0), 1, tag, out.data(), out.size(), &send),
              CHORUS_OK);
    std::string message;
    EXPECT_EQ(receive.Wait(kTimeoutMs, &message), CHORUS_INVALID_ARGUMENT) << message;
    EXPECT_NE(message.find("receives exactly " + std::to_string(receive_bytes)), std::string::npos)
        << message;
    EXPECT_NE(message.find("sent " + std::to_string(kSent)), std::string::npos) << message;
    if (send.Wait(2000) == CHORUS_TIMEOUT) {
      endpoint(0).Abort();
      EXPECT_EQ(send.Wait(kTimeoutMs), CHORUS_ABORTED);
      return;  // endpoint 0 is aborted: the other case needs a fresh group
    }
  }
}

// Four threads per rank share one endpoint, each with its own tag, sending and receiving at once.
TEST_F(TwoRanks, SeveralThreadsShareOneEndpoint) {
  constexpr int kThreads = 4;
  constexpr int kMessages = 200;
  const auto failures = conformance::RunRankThreads(2 * kThreads, [&](int id) -> std::string {
    const int rank = id % 2, thread = id / 2;
    const uint64_t tag = 100 + static_cast<uint64_t>(thread);
    for (int i = 0; i < kMessages; ++i) {
      uint64_t out = static_cast<uint64_t>((rank * kThreads + thread) * 100000 + i), in = 0;
      PluginRequest send, receive;
      if (conformance::StartReceive(endpoint(rank), 1 - rank, tag, &in, 8, &receive) != CHORUS_OK ||
          conformance::StartSend(endpoint(rank), 1 - rank, tag, &out, 8, &send) != CHORUS_OK) {
        return "start failed: " + plugin_->LastError();
      }
      std::string message;
      if (receive.Wait(kTimeoutMs, &message) != CHORUS_OK) return "receive: " + message;
      if (send.Wait(kTimeoutMs, &message) != CHORUS_OK) return "send: " + message;
      const uint64_t expected =
          static_cast<uint64_t>(((1 - rank) * kThreads + thread) * 100000 + i);
      if (in != expected) {
        return "message " + std::to_string(i) + " of tag " + std::to_string(tag) + " is " +
               std::to_string(in) + ", expected " + std::to_string(expected);
      }
    }
    return "";
  });
  EXPECT_EQ(failures.Joined(), "");
}

// ---- A peer killed with SIGKILL during a receive ------------------------------------------------

TransportConfig JobConfig(int rank, const CKvStore& store) {
  TransportConfig config;
  config.rank = rank;
  config.size = 2;
  config.store = store.get();
  config.timeout_ms = kTimeoutMs;
  return config;
}

// The peer's part (CHORUS_UCX_TEST_PEER_MODE): "small" sends one message and sleeps; "large" then
// streams messages of kLargeBytes (tags 2, 3, ...: UCX's rendezvous, cma's reads within a host).
constexpr const char* kChildModeVariable = "CHORUS_UCX_TEST_PEER_MODE";
constexpr size_t kLargeBytes = size_t{16} << 20;

// The peer (rank 1), in a process of its own: sends one message (so that UCX has a connection
// to lose), says it is ready, and sleeps until it is killed; in "large" mode it says it is ready
// after its first large message went, and goes on sending them until it is killed.
TEST(KilledPeer, PeerProcess) {
  const char* folder = std::getenv(kChildStoreVariable);
  if (folder == nullptr) GTEST_SKIP() << "the peer of KilledPeer.*FailsWithPeerLost";
  const char* mode = std::getenv(kChildModeVariable);
  const bool large = mode != nullptr && std::string(mode) == "large";
  const std::shared_ptr<KvStore> shared = MakeFileStore(folder);
  CKvStore store(WithPrefix(shared, "job/"));
  const std::shared_ptr<PluginLibrary> plugin = LoadUcx();
  auto endpoint = TransportEndpoint::Create(plugin, UcxApi(*plugin), JobConfig(1, store));
  uint64_t hello = 42;
  PluginRequest send;
  ASSERT_EQ(conformance::StartSend(*endpoint, 0, 1, &hello, 8, &send), CHORUS_OK);
  ASSERT_EQ(send.Wait(kTimeoutMs), CHORUS_OK);
  if (!large) shared->Set("ready", ToBytes("1"));
  std::vector<uint8_t> message(kLargeBytes);
  for (uint64_t tag = 2; large; ++tag) {
    std::fill(message.begin(), message.end(), static_cast<uint8_t>(tag));
    PluginRequest next;
    ASSERT_EQ(conformance::StartSend(*endpoint, 0, tag, message.data(), message.size(), &next),
              CHORUS_OK);
    ASSERT_EQ(next.Wait(kTimeoutMs), CHORUS_OK);
    if (tag == 2) shared->Set("ready", ToBytes("1"));
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));  // killed long before
}

// Runs the peer in "small" or "large" mode, kills it with SIGKILL once it is ready, and checks
// that rank 0's receives from it end with PEER_LOST within the kit's 5 s (the time is printed).
// "small": a receive of a message never sent is pending at the kill. "large": the peer is in the
// middle of sending a large message (its rendezvous request waits at rank 0, whose receive,
// posted after the kill, reads the dead peer's memory); the receives of the messages that came
// whole before the kill get them intact, and the first that cannot fails.
void KillPeerDuringReceive(const std::string& mode) {
  const std::filesystem::path folder = std::filesystem::temp_directory_path() /
                                       ("chorus-ucx-test-" + std::to_string(getpid()) + "-" + mode);
  std::filesystem::create_directories(folder);
  const std::shared_ptr<KvStore> shared = MakeFileStore(folder.string());
  CKvStore store(WithPrefix(shared, "job/"));

  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable)
    environment.push_back(*variable);
  environment.push_back(std::string(kChildStoreVariable) + "=" + folder.string());
  environment.push_back(std::string(kChildModeVariable) + "=" + mode);
  std::vector<char*> envp, argv;
  for (auto& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=KilledPeer.PeerProcess";
  argv = {self.data(), filter.data(), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);

  std::string failure;
  chorus_status status = CHORUS_OK;
  double seconds = 0;
  {
    const std::shared_ptr<PluginLibrary> plugin = LoadUcx();
    try {
      auto endpoint = TransportEndpoint::Create(plugin, UcxApi(*plugin), JobConfig(0, store));
      uint64_t hello = 0;
      PluginRequest first;
      std::vector<uint8_t> buffer(mode == "large" ? kLargeBytes : size_t{1} << 20);
      EXPECT_EQ(conformance::StartReceive(*endpoint, 1, 1, &hello, 8, &first), CHORUS_OK);
      EXPECT_EQ(first.Wait(kTimeoutMs), CHORUS_OK);
      EXPECT_EQ(hello, 42u);
      uint64_t tag = 2;
      if (mode == "large") {  // the first large message, before the peer says it is ready
        PluginRequest receive;
        EXPECT_EQ(
            conformance::StartReceive(*endpoint, 1, tag, buffer.data(), buffer.size(), &receive),
            CHORUS_OK);
        EXPECT_EQ(receive.Wait(kTimeoutMs), CHORUS_OK);
        ++tag;
      }
      shared->Get("ready", std::chrono::milliseconds(kTimeoutMs));
      PluginRequest receive;
      if (mode == "small") {
        EXPECT_EQ(
            conformance::StartReceive(*endpoint, 1, tag, buffer.data(), buffer.size(), &receive),
            CHORUS_OK);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its next one is asked
      }
      kill(child, SIGKILL);  // not reaped until the receive ended: a zombie counts as dead
      const auto start = Clock::now();
      if (mode == "small") {
        status = receive.Wait(kTimeoutMs, &failure);
      } else {
        for (;; ++tag) {
          PluginRequest next;
          status =
              conformance::StartReceive(*endpoint, 1, tag, buffer.data(), buffer.size(), &next);
          if (status == CHORUS_OK) status = next.Wait(kTimeoutMs, &failure);
          if (status != CHORUS_OK || tag > 100) break;
          EXPECT_EQ(std::count(buffer.begin(), buffer.end(), static_cast<uint8_t>(tag)),
                    static_cast<ptrdiff_t>(buffer.size()))
              << "message " << tag << " came whole but not intact";
        }
      }
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
      // Later operations to the lost peer fail too.
      PluginRequest later;
      chorus_status started = conformance::StartSend(*endpoint, 1, 1000, &hello, 8, &later);
      if (started == CHORUS_OK) started = later.Wait(kTimeoutMs);
      EXPECT_EQ(started, CHORUS_PEER_LOST);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
      kill(child, SIGKILL);
    }
  }
  int child_status = 0;
  waitpid(child, &child_status, 0);
  std::filesystem::remove_all(folder);
  EXPECT_EQ(status, CHORUS_PEER_LOST) << failure;
  EXPECT_LT(seconds, 5.0) << "a dead peer must end the receive within the kit's 5 s";
  const char* tls = std::getenv("UCX_TLS");
  const char* same_host = std::getenv("CHORUS_UCX_SAME_HOST");
  std::cout << "ucx: PEER_LOST " << seconds * 1000 << " ms after SIGKILL of the peer (" << mode
            << " messages, UCX_TLS=" << (tls ? tls : "unset")
            << ", CHORUS_UCX_SAME_HOST=" << (same_host ? same_host : "unset") << "): " << failure
            << "\n";
}

// A peer stopped with SIGSTOP (alive, silent) while rank 0 sends a large message to it and waits
// for one from it: the receive times out, and abort and destroy then end within destroy's own
// bound (kCloseMs, 2 s, in ucx_endpoint.cc), not later: a survivor of a hung worker must exit
// soon after its time-out.
TEST(StoppedPeer, AbortAndDestroyEndPromptly) {
  const std::filesystem::path folder = std::filesystem::temp_directory_path() /
                                       ("chorus-ucx-test-" + std::to_string(getpid()) + "-stop");
  std::filesystem::create_directories(folder);
  const std::shared_ptr<KvStore> shared = MakeFileStore(folder.string());
  CKvStore store(WithPrefix(shared, "job/"));
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable)
    environment.push_back(*variable);
  environment.push_back(std::string(kChildStoreVariable) + "=" + folder.string());
  environment.push_back(std::string(kChildModeVariable) + "=large");
  std::vector<char*> envp;
  for (auto& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=KilledPeer.PeerProcess";
  std::vector<char*> argv = {self.data(), filter.data(), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  double seconds = -1;
  {
    const std::shared_ptr<PluginLibrary> plugin = LoadUcx();
    try {
      auto endpoint = TransportEndpoint::Create(plugin, UcxApi(*plugin), JobConfig(0, store));
      uint64_t hello = 0;
      std::vector<uint8_t> in(kLargeBytes), out(kLargeBytes, 1);
      PluginRequest first, large, send, receive;
      EXPECT_EQ(conformance::StartReceive(*endpoint, 1, 1, &hello, 8, &first), CHORUS_OK);
      EXPECT_EQ(first.Wait(kTimeoutMs), CHORUS_OK);
      EXPECT_EQ(conformance::StartReceive(*endpoint, 1, 2, in.data(), in.size(), &large),
                CHORUS_OK);
      EXPECT_EQ(large.Wait(kTimeoutMs), CHORUS_OK);
      shared->Get("ready", std::chrono::milliseconds(kTimeoutMs));
      kill(child, SIGSTOP);
      EXPECT_EQ(conformance::StartSend(*endpoint, 1, 500, out.data(), out.size(), &send),
                CHORUS_OK);
      EXPECT_EQ(conformance::StartReceive(*endpoint, 1, 501, in.data(), in.size(), &receive),
                CHORUS_OK);
      EXPECT_EQ(receive.Wait(500), CHORUS_TIMEOUT);
      const auto start = Clock::now();
      endpoint->Abort();
      endpoint.reset();
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  kill(child, SIGKILL);
  int child_status = 0;
  waitpid(child, &child_status, 0);
  std::filesystem::remove_all(folder);
  EXPECT_GE(seconds, 0.0);
  EXPECT_LT(seconds, 2.5) << "abort and destroy took " << seconds << " s";
  std::cout << "ucx: abort and destroy took " << seconds * 1000
            << " ms with a stopped peer (CHORUS_UCX_SAME_HOST="
            << (std::getenv("CHORUS_UCX_SAME_HOST") ? std::getenv("CHORUS_UCX_SAME_HOST") : "unset")
            << ")\n";
}

TEST(KilledPeer, ReceiveFailsWithPeerLost) { KillPeerDuringReceive("small"); }

TEST(KilledPeer, ReceiveAmidLargeMessagesFailsWithPeerLost) { KillPeerDuringReceive("large"); }

}  // namespace
}  // namespace chorus
