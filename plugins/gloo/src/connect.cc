#include "connect.h"

#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gloo_errors.h"
#include "kv_store_adapter.h"
#include "mesh_report.h"
#include "own_sockets.h"

namespace chorus::gloo_plugin {
namespace {

// Checked here rather than left to Gloo: Gloo's lookup throws for a missing interface without
// freeing its getifaddrs() list (a leak LeakSanitizer reports), and its message does not say
// which interfaces exist.
void CheckInterfaceExists(const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return;  // let Gloo report it
  std::set<std::string> with_address;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    const int family = entry->ifa_addr->sa_family;
    if (family == AF_INET || family == AF_INET6) with_address.insert(entry->ifa_name);
  }
  ::freeifaddrs(list);
  if (with_address.count(name) != 0) return;
  std::string names;
  for (const auto& n : with_address) names += (names.empty() ? "" : ", ") + n;
  sdk::Fail(CHORUS_INVALID_ARGUMENT, "gloo create: option interface=", name,
            " names no network interface with an IP address here; the interfaces are: ", names);
}

std::shared_ptr<::gloo::transport::Device> CreateTcpDevice(const CommunicatorOptions& options) {
  ::gloo::transport::tcp::attr attr;
  std::string where;
  if (!options.interface.empty()) {
    CheckInterfaceExists(options.interface);
    attr.iface = options.interface;
    where = "interface=" + options.interface;
  } else {
    attr.hostname = options.hostname.empty() ? "127.0.0.1" : options.hostname;
    where = "hostname=" + attr.hostname;
  }
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "gloo create: cannot listen on ", where,
              ": Gloo: ", e.what());
  }
}

// Gloo's TCP pairs write with writev(), which raises SIGPIPE when a peer has died: the default
// action would kill this process before Gloo can report the closed connection as PEER_LOST. As
// gRPC does, ignore SIGPIPE unless the application installed a handler of its own.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      (current.sa_flags & SA_SIGINFO) == 0) {
    ::signal(SIGPIPE, SIG_IGN);
    sdk::Log(CHORUS_LOG_DEBUG,
             "gloo: SIGPIPE set to ignored, so a dead peer is an error, not a kill");
  }
}

// How many times the ranks set up their connections, each time on new ports, when a process that
// is not a rank took a pair's place.
constexpr int kSetUpAttempts = 4;

namespace tcp = ::gloo::transport::tcp;

// A Gloo context over pairs this plugin connected itself (ConnectOnce), in place of
// gloo::rendezvous::Context::connectFullMesh, which cannot check what it connected.
class MeshContext : public ::gloo::Context {
 public:
  MeshContext(int rank, int size, std::shared_ptr<::gloo::transport::Device> device,
              std::shared_ptr<::gloo::transport::Context> transport)
      : ::gloo::Context(rank, size) {
    device_ = std::move(device);
    transportContext_ = std::move(transport);
  }
};

// Which side of a pair Gloo's tcp::Pair::connect makes accept: the lower address (compared as
// Gloo compares them: the IP bytes, then the ports as stored, in network byte order).
bool GlooAccepts(const sockaddr_storage& self, const sockaddr_storage& peer) {
  int order = 0;
  if (self.ss_family == AF_INET && peer.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(self);
    const auto& b = reinterpret_cast<const sockaddr_in&>(peer);
    order = std::memcmp(&a.sin_addr, &b.sin_addr, sizeof a.sin_addr);
    if (order == 0) order = a.sin_port - b.sin_port;
  } else if (self.ss_family == AF_INET6 && peer.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(self);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(peer);
    order = std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof a.sin6_addr);
    if (order == 0) order = a.sin6_port - b.sin6_port;
  }
  return order < 0;
}

// Connects to `listener` and closes at once: Gloo's listener there, waiting for this rank's
// connection (which an outsider's took), takes it and fails promptly instead of waiting for
// five time-outs. Returns this end's address ("" when the connection failed).
std::string Release(const sockaddr_storage& listener, int64_t timeout_ms) {
  const int fd = ::socket(listener.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  const timeval limit{static_cast<time_t>(timeout_ms / 1000),
                      static_cast<suseconds_t>(timeout_ms % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  const socklen_t length =
      listener.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::string local;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&listener), length) == 0) {
    sockaddr_storage self{};
    socklen_t self_length = sizeof self;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_length) == 0) {
      local = AddressText(self);
    }
  }
  ::close(fd);
  return local;
}

// Just before this rank connects a pair that listens at `listening`: what Gloo took there that
// cannot be the peer ("" if nothing). Gloo's pair takes the first connection its listening
// socket accepts for the peer, even before this rank connects the pair. On the side that
// connects, the peer never connects to that socket, so anything it accepted is another
// process's; on the side that accepts, the peer's connection may well be there already, but it
// stays open, so a socket that stopped listening without an open connection accepted another.
std::string BeforeConnect(const sockaddr_storage& listening, bool listens) {
  const SocketsAt sockets = OwnSocketsAt(listening);
  if (!listens && !sockets.accepted.empty()) return "a connection from " + sockets.accepted;
  if (!sockets.listening && sockets.accepted.empty()) return "a connection that has already closed";
  return "";
}

struct Attempt {
  std::shared_ptr<::gloo::transport::Context> transport;
  RankReport report;
};

// Gloo waits up to five time-outs for a peer's connection, and nothing of Gloo ends that wait
// early. While this rank connects its pairs, a watchdog therefore asks the store every 100 ms
// whether it still answers: once it fails (the core gave it up, because a worker died during
// the start-up, or the leader did), it closes every pair, and each wait ends at once; the
// report that follows fails on the same store, with the core's cause.
class ConnectWatchdog {
 public:
  ConnectWatchdog(const chorus_kv_store& store, ::gloo::transport::Context& transport, int rank,
                  int size)
      : thread_([this, &store, &transport, rank, size] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!done_) {
            if (changed_.wait_for(lock, std::chrono::milliseconds(100), [&] { return done_; })) {
              return;
            }
            int exists = 0;
            if (store.check(store.ctx, "setup-watchdog", &exists) == CHORUS_OK) continue;
            for (int peer = 0; peer < size; ++peer) {
              if (peer != rank) transport.getPair(peer)->close();
            }
            return;
          }
        }) {}
  ~ConnectWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  ConnectWatchdog(const ConnectWatchdog&) = delete;
  ConnectWatchdog& operator=(const ConnectWatchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

// One set-up: a pair per peer, their addresses exchanged under `prefix`, every pair connected in
// rank order as connectFullMesh does (a failing pair does not stop the others, so no peer waits
// for a connection this rank never makes), and this rank's report of what it got.
Attempt ConnectOnce(const std::shared_ptr<::gloo::transport::Device>& device, KvStoreAdapter& store,
                    const std::string& prefix, int rank, int size, int64_t timeout_ms) {
  Attempt attempt;
  attempt.transport = device->createContext(rank, size);
  attempt.transport->setTimeout(std::chrono::milliseconds(timeout_ms));
  std::vector<char> addresses;  // of this rank's pairs, in the order of their peers
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<char> bytes = attempt.transport->createPair(peer)->address().bytes();
    addresses.insert(addresses.end(), bytes.begin(), bytes.end());
  }
  store.set(prefix + "addresses/" + std::to_string(rank), addresses);
  // Every peer's address for its pair with this rank, before any pair connects: a rank that
  // never arrives then fails every other rank here, at the time-out, rather than leaving one
  // waiting for a connection that never comes (Gloo waits five time-outs for it).
  std::vector<std::vector<char>> peer_addresses(static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<char> theirs = store.get(prefix + "addresses/" + std::to_string(peer));
    const size_t each = theirs.size() / static_cast<size_t>(size - 1);
    if (each == 0 || theirs.size() % static_cast<size_t>(size - 1) != 0) {
      sdk::Fail(CHORUS_INTERNAL, "rank ", peer, " published ", theirs.size(),
                " bytes of addresses, not ", size - 1, " of equal size");
    }
    const size_t index = static_cast<size_t>(rank < peer ? rank : rank - 1);
    peer_addresses[static_cast<size_t>(peer)].assign(
        theirs.begin() + static_cast<ptrdiff_t>(index * each),
        theirs.begin() + static_cast<ptrdiff_t>((index + 1) * each));
  }
  // Fault injection for tests: ranks slow to connect, so that a test's outsider reaches every
  // listening socket first (tests/multiworker, GlooOutsider).
  if (const char* delay = std::getenv("CHORUS_GLOO_TEST_CONNECT_DELAY_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(delay)));
  }
  attempt.report.resize(static_cast<size_t>(size));
  const ConnectWatchdog watchdog(store.table(), *attempt.transport, rank, size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<char>& bytes = peer_addresses[static_cast<size_t>(peer)];
    const sockaddr_storage peer_address = tcp::Address(bytes).getSockaddr();
    auto& pair = attempt.transport->getPair(peer);
    // Copied: the pair's own address changes to its connection's end once connected.
    const sockaddr_storage self = dynamic_cast<const tcp::Address&>(pair->address()).getSockaddr();
    PairReport& report = attempt.report[static_cast<size_t>(peer)];
    report.listening = AddressText(self);
    report.listens = GlooAccepts(self, peer_address);
    report.early = BeforeConnect(self, report.listens);
    try {
      pair->connect(bytes);
      report.local = AddressText(dynamic_cast<const tcp::Address&>(pair->address()).getSockaddr());
      // The far end: where this rank connected to, or what its listener accepted.
      report.remote = report.listens ? OwnSocketsAt(self).accepted : AddressText(peer_address);
    } catch (const std::exception& e) {
      report.error = e.what();
      // This rank's connection never reached the peer's listener, which would wait for it.
      if (!report.listens && !report.early.empty()) {
        report.released_with = Release(peer_address, timeout_ms);
      }
    }
  }
  return attempt;
}

}  // namespace

std::shared_ptr<::gloo::Context> Connect(const chorus_kv_store& store, int rank, int size,
                                         int64_t timeout_ms, const CommunicatorOptions& options) {
  IgnoreSigpipeUnlessHandled();
  std::shared_ptr<::gloo::transport::Device> device = CreateTcpDevice(options);
  const std::string what =
      "gloo create (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  try {
    KvStoreAdapter adapter(store, timeout_ms, rank, size);
    for (int attempt = 1;; ++attempt) {
      const std::string prefix = "setup" + std::to_string(attempt) + "/";
      Attempt mine = ConnectOnce(device, adapter, prefix, rank, size, timeout_ms);
      // Every rank publishes what it got and reads everyone's, so all judge alike.
      std::vector<RankReport> reports(static_cast<size_t>(size));
      if (size > 1) {
        const std::string text = EncodeReport(mine.report);
        adapter.set(prefix + "report/" + std::to_string(rank),
                    std::vector<char>(text.begin(), text.end()));
      }
      for (int r = 0; r < size && size > 1; ++r) {
        const std::vector<char> theirs = adapter.get(prefix + "report/" + std::to_string(r));
        auto decoded = DecodeReport(std::string(theirs.begin(), theirs.end()), size);
        if (!decoded) {
          sdk::Fail(CHORUS_INTERNAL, "rank ", r,
                    " published a set-up report this rank cannot read (is every rank running the "
                    "same build of the gloo plugin?)");
        }
        reports[static_cast<size_t>(r)] = std::move(*decoded);
      }
      const MeshVerdict verdict = size > 1 ? JudgeMesh(reports) : MeshVerdict{};
      if (verdict.outcome == MeshVerdict::Outcome::kConnected) {
        auto context = std::make_shared<MeshContext>(rank, size, device, mine.transport);
        context->setTimeout(std::chrono::milliseconds(timeout_ms));
        if (sdk::LogEnabled(CHORUS_LOG_DEBUG)) {
          sdk::Log(CHORUS_LOG_DEBUG, what + ": connected over " + device->str() + ", all_reduce " +
                                         AlgorithmName(options.algorithm));
        }
        return context;
      }
      if (verdict.outcome == MeshVerdict::Outcome::kFailed) {
        const std::string pair = "rank " + std::to_string(verdict.rank) + "'s connection to rank " +
                                 std::to_string(verdict.peer);
        if (!verdict.from_gloo) sdk::Fail(CHORUS_INTERNAL, pair, ": ", verdict.error);
        const chorus_status status = StatusOfGlooMessage(verdict.error);
        sdk::Fail(status, DescribeGlooFailure(status, pair, verdict.error, timeout_ms));
      }
      // A process that is not a rank took a pair's place: Gloo cannot tell it from the peer.
      if (attempt < kSetUpAttempts) {
        sdk::Log(CHORUS_LOG_WARN, what +
                                      ": a process that is not a rank of this job connected to "
                                      "a Gloo listener during set-up (" +
                                      verdict.intruder + "); setting up again on new ports (" +
                                      std::to_string(attempt + 1) + " of " +
                                      std::to_string(kSetUpAttempts) + ")");
        continue;
      }
      sdk::Fail(CHORUS_UNAVAILABLE,
                "an unknown process (not a rank of this job) connected to Gloo's listening ports "
                "during set-up, in each of ",
                kSetUpAttempts, " attempts; the last time, ", verdict.intruder,
                ". Gloo takes the first process that connects to a pair's port for the peer and "
                "cannot check the job secret: keep other processes from connecting to the ranks' "
                "ports (a firewall), or listen where they cannot reach (option interface or "
                "hostname)");
    }
  } catch (...) {
    throw TranslateCurrentException(what, timeout_ms);
  }
}

}  // namespace chorus::gloo_plugin
