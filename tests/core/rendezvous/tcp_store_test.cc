// What only the TCP store does: connecting before the leader serves, a lost leader, lost clients,
// malformed and silent peers, the job secret, and the health request.
#include "scoped_variable.h"
#include "store_test_support.h"

namespace chorus {
namespace {

// ---- TCP store ----------------------------------------------------------------------------

// A port that was free a moment ago.
uint16_t FreePort() { return TcpStoreServer::Start("127.0.0.1", 0)->port(); }

TEST(TcpStoreTest, ClientStartedBeforeTheServerConnectsOnceItServes) {
  const uint16_t port = FreePort();
  std::shared_ptr<KvStore> client;
  std::thread connecting = Spawn([&] { client = ConnectTcpStore("127.0.0.1", port, 5s); });
  std::this_thread::sleep_for(300ms);
  const auto server = TcpStoreServer::Start("127.0.0.1", port);
  connecting.join();
  ASSERT_NE(client, nullptr);
  client->Set("k", ToBytes("v"));
  EXPECT_EQ(ToString(client->Get("k", 1s)), "v");
  EXPECT_EQ(client->Describe(), "tcp store 127.0.0.1:" + std::to_string(port));
}

TEST(TcpStoreTest, ConnectingToNoServerTimesOutNamingTheAddress) {
  const uint16_t port = FreePort();
  const auto start = Clock::now();
  const Error error = Thrown([&] { ConnectTcpStore("127.0.0.1", port, 200ms); });
  EXPECT_EQ(error.status(), CHORUS_TIMEOUT);
  EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << error.what();
  EXPECT_GE(Since(start), 200ms);
  EXPECT_LT(Since(start), 1s);
}

TEST(TcpStoreTest, ADestroyedServerFailsAPendingGetQuicklyWithPeerLost) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto client = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  client->Set("warm", ToBytes("up"));
  std::thread stopper = Spawn([&] {
    std::this_thread::sleep_for(100ms);
    const auto start = Clock::now();
    server.reset();
    EXPECT_LT(Since(start), 500ms) << "the server's destructor must be prompt";
  });
  const auto start = Clock::now();
  const Error error = Thrown([&] { client->Get("never", 30s); });
  stopper.join();
  EXPECT_LT(Since(start), 2s);
  EXPECT_EQ(error.status(), CHORUS_PEER_LOST);
  EXPECT_NE(std::string(error.what()).find("closed the connection"), std::string::npos)
      << error.what();
  EXPECT_NE(std::string(error.what()).find("'never'"), std::string::npos) << error.what();
  // Later requests fail at once, the same way.
  EXPECT_EQ(Thrown([&] { client->Set("k", {}); }).status(), CHORUS_PEER_LOST);
}

TEST(TcpStoreTest, AClientLostWithoutGoodbyeIsRecorded) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto observer = ConnectTcpStore("127.0.0.1", server->port(), 5s);

  // A clean goodbye is not a loss.
  {
    const auto polite = ConnectTcpStore("127.0.0.1", server->port(), 5s);
    AnnounceTcpStoreClient(*polite, "worker 1");
  }
  CrashAnnouncedClient(server->port(), "worker 2");
  EXPECT_EQ(ToString(observer->Get("chorus/lost/worker 2", 5s)), "1");
  CrashAnnouncedClient(server->port(), "worker 3");
  EXPECT_EQ(ToString(observer->Get("chorus/lost/worker 3", 5s)), "1");
  EXPECT_EQ(ToString(observer->Get("chorus/lost", 0ms)), "worker 2,worker 3");
  EXPECT_FALSE(observer->Check("chorus/lost/worker 1"));
}

// A member is lost when its last connection closes without a goodbye: one it gives up while
// another stays open (a survivor abandons its store connection when the job fails) is not a
// death.
TEST(TcpStoreTest, AMemberWithAConnectionStillOpenIsNotLost) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto observer = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  const auto first = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  const auto second = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*first, "worker 4");
  AnnounceTcpStoreClient(*second, "worker 4");
  AbandonTcpStore(*first, "given up");
  EXPECT_EQ(Thrown([&] { first->Check("k"); }).status(), CHORUS_PEER_LOST);
  std::this_thread::sleep_for(200ms);  // the server has seen the connection close
  EXPECT_FALSE(observer->Check("chorus/lost/worker 4"));
  AbandonTcpStore(*second, "given up too");
  EXPECT_EQ(ToString(observer->Get("chorus/lost/worker 4", 5s)), "1");
  EXPECT_EQ(ToString(observer->Get("chorus/lost", 0ms)), "worker 4");
}

// Forks a member that, after `delay`, connects, says hello as `name`, reads key "data" and
// leaves; its exit code is 0 when it read "x". Returns its pid.
pid_t LateMember(uint16_t port, const std::string& name, milliseconds delay) {
  const pid_t child = ::fork();
  if (child != 0) return child;
  try {
    std::this_thread::sleep_for(delay);
    auto store = ConnectTcpStore("127.0.0.1", port, 5s);
    AnnounceTcpStoreClient(*store, name);
    const bool read = ToString(store->Get("data", 5s)) == "x";
    store.reset();  // a goodbye
    ::_exit(read ? 0 : 1);
  } catch (...) {
    ::_exit(2);
  }
}

int ExitCode(pid_t child) {
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The leader finishes first: its server, destroyed, serves on until the other members (which
// had not even connected yet) have come and left, then returns at once.
TEST(TcpStoreTest, ADestroyedServerServesTheOtherMembersUntilTheyLeave) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, 20s, /*other_members=*/2);
  const uint16_t port = server->port();
  {
    const auto own = ConnectTcpStore("127.0.0.1", port, 5s);
    own->Set("data", ToBytes("x"));
  }
  const pid_t first = LateMember(port, "worker 1", 300ms);
  const pid_t second = LateMember(port, "worker 2", 600ms);
  const auto start = Clock::now();
  server.reset();  // returns once both came and went
  EXPECT_GE(Since(start), 500ms) << "the server closed before the second member came";
  EXPECT_LT(Since(start), 15s) << "the server waited for its linger, not for the members";
  EXPECT_EQ(ExitCode(first), 0);
  EXPECT_EQ(ExitCode(second), 0);
}

// A member that never leaves holds the server only for the linger; this process's own
// connections never hold it.
TEST(TcpStoreTest, TheLingerBoundsTheWaitAndOwnConnectionsDoNotCount) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, 300ms);
  const auto own = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      const auto store = ConnectTcpStore("127.0.0.1", server->port(), 5s);
      store->Set("connected", {});
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      std::this_thread::sleep_for(30s);  // never leaves; killed below
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  const auto start = Clock::now();
  server.reset();
  EXPECT_GE(Since(start), 250ms) << "the server did not wait for the other process's client";
  EXPECT_LT(Since(start), 5s) << "the linger did not bound the wait";
  EXPECT_EQ(Thrown([&] { own->Get("data", 1s); }).status(), CHORUS_PEER_LOST);
  ::kill(child, SIGKILL);
  ExitCode(child);
}

TEST(TcpStoreTest, LeavingClosesTheConnectionAndLaterCallsSaySo) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto observer = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  const auto store = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*store, "worker 1");
  LeaveTcpStore(*store);
  LeaveTcpStore(*store);  // twice does nothing
  const Error error = Thrown([&] { store->Set("k", {}); });
  EXPECT_EQ(error.status(), CHORUS_PEER_LOST);
  EXPECT_NE(std::string(error.what()).find("this process left the tcp store"), std::string::npos)
      << error.what();
  // A goodbye, not a loss.
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(observer->Check("chorus/lost/worker 1"));
  EXPECT_EQ(Thrown([&] {
              auto in_process = MakeInProcessStore();
              LeaveTcpStore(*in_process);
            }).status(),
            CHORUS_INVALID_ARGUMENT);
}

TEST(TcpStoreTest, AnnounceNeedsATcpConnection) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto client = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  const auto in_process = MakeInProcessStore();
  EXPECT_EQ(Thrown([&] { AnnounceTcpStoreClient(*in_process, "w"); }).status(),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(Thrown([&] { AnnounceTcpStoreClient(*WithPrefix(client, "p/"), "w"); }).status(),
            CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(Thrown([&] { AnnounceTcpStoreClient(*client, ""); }).status(), CHORUS_INVALID_ARGUMENT);
}

TEST(TcpStoreTest, SixteenClientsRendezvous) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  constexpr int kClients = 16;
  std::vector<std::string> ranks;
  for (int i = 0; i < kClients; ++i) ranks.push_back("rank/" + std::to_string(i));
  std::atomic<int> correct{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.push_back(Spawn([&, i] {
      const auto store = ConnectTcpStore("127.0.0.1", server->port(), 5s);
      AnnounceTcpStoreClient(*store, "worker " + std::to_string(i));
      store->Add("arrived", 1);
      store->Set(ranks[i], ToBytes(std::to_string(i)));
      store->Wait(ranks, 5s);
      int sum = 0;
      for (const std::string& rank : ranks) sum += std::stoi(ToString(store->Get(rank, 0ms)));
      if (sum == kClients * (kClients - 1) / 2 && store->Add("arrived", 0) == kClients) ++correct;
    }));
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(correct.load(), kClients);
  const auto observer = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  EXPECT_FALSE(observer->Check("chorus/lost"));
}

// A raw TCP socket connected to 127.0.0.1:port (port 0: one that listens instead, on any port).
class RawSocket {
 public:
  explicit RawSocket(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    auto* raw = reinterpret_cast<sockaddr*>(&address);
    if (port == 0) {
      EXPECT_EQ(::bind(fd_, raw, sizeof(address)), 0);
      EXPECT_EQ(::listen(fd_, 8), 0);
    } else {
      EXPECT_EQ(::connect(fd_, raw, sizeof(address)), 0);
    }
    timeval two_seconds{2, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &two_seconds, sizeof(two_seconds));
  }
  ~RawSocket() { ::close(fd_); }
  int fd() const { return fd_; }
  uint16_t port() const {
    sockaddr_in address{};
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    return ntohs(address.sin_port);
  }

 private:
  int fd_;
};

TEST(TcpStoreTest, AMalformedClientIsDroppedAndOthersAreServed) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto client = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  const RawSocket garbage(server->port());
  const uint8_t huge_frame[] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
  ASSERT_EQ(::send(garbage.fd(), huge_frame, sizeof(huge_frame), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(huge_frame)));
  char buffer[256];
  ssize_t n = 0;
  while ((n = ::recv(garbage.fd(), buffer, sizeof buffer, 0)) > 0) {  // the greeting
  }
  EXPECT_EQ(n, 0) << "the server should close the connection";
  client->Set("still", ToBytes("serving"));
  EXPECT_EQ(ToString(client->Get("still", 1s)), "serving");
}

// A listener that accepts and sends `greeting` (nothing when empty), then stays silent.
class FakeStore {
 public:
  explicit FakeStore(Bytes greeting) : greeting_(std::move(greeting)) {
    thread_ = std::thread([this] {
      accepted_ = ::accept(listener_.fd(), nullptr, nullptr);
      if (accepted_ >= 0 && !greeting_.empty()) {
        (void)::send(accepted_, greeting_.data(), greeting_.size(), MSG_NOSIGNAL);
      }
    });
  }
  ~FakeStore() {
    ::shutdown(listener_.fd(), SHUT_RDWR);
    thread_.join();
    if (accepted_ >= 0) ::close(accepted_);
  }
  uint16_t port() const { return listener_.port(); }

 private:
  const RawSocket listener_{0};
  const Bytes greeting_;
  int accepted_ = -1;
  std::thread thread_;
};

TEST(TcpStoreTest, AServerThatNeverAnswersCannotHangAGet) {
  FakeStore silent(tcp_store::EncodeGreeting({}));  // greets, then never answers
  const auto client = ConnectTcpStore("127.0.0.1", silent.port(), 5s);
  const auto start = Clock::now();
  const Error error = Thrown([&] { client->Get("k", 100ms); });
  EXPECT_EQ(error.status(), CHORUS_PEER_LOST);
  EXPECT_NE(std::string(error.what()).find("did not answer"), std::string::npos) << error.what();
  EXPECT_GE(Since(start), 100ms);
  EXPECT_LT(Since(start), 4s);
}

// A server that has begun its answer is not "not answering": a large value behind a busy server
// may take longer to arrive than a short wait's grace (2 s), as the transport template's 64 MiB
// messages between two processes on two cores did.
TEST(TcpStoreTest, AnAnswerThatTakesLongerThanTheWaitsGraceToArriveIsReceived) {
  const RawSocket listener(0);
  const Bytes value(1 << 16, 7);
  std::thread server([&] {
    const int fd = ::accept(listener.fd(), nullptr, nullptr);
    ASSERT_GE(fd, 0);
    const Bytes greeting = tcp_store::EncodeGreeting({});
    (void)::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL);
    uint8_t buffer[4096];
    (void)::recv(fd, buffer, sizeof buffer, 0);  // the Get
    const Bytes answer = tcp_store::EncodeResponse({CHORUS_OK, value});
    const size_t first = answer.size() / 2;
    (void)::send(fd, answer.data(), first, MSG_NOSIGNAL);
    std::this_thread::sleep_for(2500ms);  // past the Get's 100 ms and its 2 s grace
    (void)::send(fd, answer.data() + first, answer.size() - first, MSG_NOSIGNAL);
    (void)::recv(fd, buffer, sizeof buffer, 0);  // until the client closes
    ::close(fd);
  });
  Bytes got;
  std::string error;
  try {
    const auto client = ConnectTcpStore("127.0.0.1", listener.port(), 5s);
    got = client->Get("k", 100ms);
  } catch (const Error& e) {
    error = e.what();
  }
  server.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, value);
}

TEST(TcpStoreTest, AProgramThatIsNoStoreIsNamedAsSuch) {
  const std::string http = "HTTP/1.0 400 Bad Request\r\n\r\n";
  FakeStore web(Bytes(http.begin(), http.end()));
  const Error error = Thrown([&] { ConnectTcpStore("127.0.0.1", web.port(), 2s); });
  EXPECT_NE(std::string(error.what()).find("not as a chorus rendezvous store"), std::string::npos)
      << error.what();
  EXPECT_NE(std::string(error.what()).find("another program on the leader's port"),
            std::string::npos)
      << error.what();

  FakeStore mute({});  // accepts (the kernel's backlog), never greets: a stopped leader
  const auto start = Clock::now();
  const Error silent = Thrown([&] { ConnectTcpStore("127.0.0.1", mute.port(), 300ms); });
  EXPECT_EQ(silent.status(), CHORUS_TIMEOUT) << silent.what();
  EXPECT_NE(std::string(silent.what()).find("sent nothing in time"), std::string::npos)
      << silent.what();
  EXPECT_LT(Since(start), 3s);
}

using test::ScopedVariable;

constexpr const char* kSecret = "0123456789abcdef-the-job-secret";

TEST(TcpStoreSecretTest, HoldersOfTheSecretAreServed) {
  ScopedVariable secret("CHORUS_JOB_SECRET", kSecret);
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto a = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  const auto b = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*a, "worker 0");
  a->Set("k", ToBytes("v"));
  EXPECT_EQ(ToString(b->Get("k", 1s)), "v");
}

TEST(TcpStoreSecretTest, AProcessWithoutTheSecretIsRefusedAndNamesTheFix) {
  std::unique_ptr<TcpStoreServer> server;
  {
    ScopedVariable secret("CHORUS_JOB_SECRET", kSecret);
    server = TcpStoreServer::Start("127.0.0.1", 0);
  }
  ScopedVariable none("CHORUS_JOB_SECRET", nullptr);
  const Error error = Thrown([&] { ConnectTcpStore("127.0.0.1", server->port(), 2s); });
  EXPECT_EQ(error.status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error.what()).find("admits only holders of the job's secret"),
            std::string::npos)
      << error.what();
  EXPECT_NE(std::string(error.what()).find("CHORUS_JOB_SECRET"), std::string::npos) << error.what();

  ScopedVariable wrong("CHORUS_JOB_SECRET", "another-job-secret-of-32-bytes!!");
  const Error refused = Thrown([&] { ConnectTcpStore("127.0.0.1", server->port(), 2s); });
  EXPECT_EQ(refused.status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(refused.what()).find("refused this process"), std::string::npos)
      << refused.what();
}

TEST(TcpStoreSecretTest, AMemberRefusesAStoreWithoutTheSecret) {
  const auto open_server = TcpStoreServer::Start("127.0.0.1", 0);
  ScopedVariable secret("CHORUS_JOB_SECRET", kSecret);
  const Error error = Thrown([&] { ConnectTcpStore("127.0.0.1", open_server->port(), 2s); });
  EXPECT_NE(std::string(error.what()).find("runs without one"), std::string::npos) << error.what();
}

// Sends `frame` on `socket` and reports whether the server then closed the connection.
bool ServerClosesAfter(const RawSocket& socket, const Bytes& frame) {
  if (!frame.empty() && ::send(socket.fd(), frame.data(), frame.size(), MSG_NOSIGNAL) !=
                            static_cast<ssize_t>(frame.size())) {
    return true;
  }
  uint8_t buffer[4096];
  // Skip the greeting (and any answer). 0 is the close, and so is a reset (the server closed
  // with bytes of ours unread); any other -1 is the 2 s receive time-out.
  for (;;) {
    const ssize_t n = ::recv(socket.fd(), buffer, sizeof buffer, 0);
    if (n <= 0) return n == 0 || errno == ECONNRESET;
  }
}

TEST(TcpStoreSecretTest, AnOutsiderCannotReadWriteOrDeclareAMemberLost) {
  ScopedVariable secret("CHORUS_JOB_SECRET", kSecret);
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto member = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*member, "worker 0");
  member->Set("k", ToBytes("v"));

  // Requests without the proof: HELLO as a member, then a close without BYE; a SET; a GET.
  for (const tcp_store::Request& request :
       {tcp_store::Request{tcp_store::Op::kHello, {"worker 1", "pid 1 on elsewhere"}, {}, 0},
        tcp_store::Request{tcp_store::Op::kSet, {"k"}, ToBytes("overwritten"), 0},
        tcp_store::Request{tcp_store::Op::kGet, {"k"}, {}, 0}}) {
    const RawSocket outsider(server->port());
    EXPECT_TRUE(ServerClosesAfter(outsider, tcp_store::EncodeRequest(request)));
  }
  // A frame declared at 128 MiB, half sent: refused at its header, nothing held.
  const RawSocket hog(server->port());
  Bytes header = {0x08, 0x00, 0x00, 0x00};
  header.resize(64 * 1024, 0);
  EXPECT_TRUE(ServerClosesAfter(hog, header));

  EXPECT_EQ(ToString(member->Get("k", 1s)), "v");
  EXPECT_FALSE(member->Check("chorus/lost/worker 1"));
  EXPECT_FALSE(member->Check("chorus/lost"));
}

TEST(TcpStoreTest, OneTaskNameBelongsToOneProcess) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto member = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*member, "worker 1");
  AnnounceTcpStoreClient(*member, "worker 1");  // the same process may say it again
  const RawSocket impostor(server->port());
  const Bytes hello = tcp_store::EncodeRequest(
      {tcp_store::Op::kHello, {"worker 1", "pid 1 on elsewhere, 00000000"}, {}, 0});
  ASSERT_EQ(::send(impostor.fd(), hello.data(), hello.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(hello.size()));
  std::string answers;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(impostor.fd(), buffer, sizeof buffer, 0)) > 0;) {
    answers.append(buffer, static_cast<size_t>(n));
    if (answers.find("TF_CONFIG") != std::string::npos) break;
  }
  EXPECT_NE(answers.find("'worker 1' already joined the job from another process"),
            std::string::npos)
      << answers;
}

TEST(TcpStoreTest, AnOversizedFrameIsRefusedAtItsHeader) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const RawSocket hog(server->port());
  Bytes header = {0x08, 0x00, 0x00, 0x00};  // 128 MiB declared, more than a store frame may be
  header.resize(64 * 1024, 0);
  EXPECT_TRUE(ServerClosesAfter(hog, header));
}

TEST(TcpStoreTest, ServingTwiceOnOnePortFails) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  EXPECT_EQ(Thrown([&] { TcpStoreServer::Start("127.0.0.1", server->port()); }).status(),
            CHORUS_UNAVAILABLE);
}

TEST(TcpStoreTest, HealthAnswersEachHeartbeatsSilenceAndTheLost) {
  const auto server = TcpStoreServer::Start("127.0.0.1", 0);
  const auto quiet = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*quiet, "worker 1");
  tcp_store::ReadHealth(*quiet, 5s);  // now a heartbeat connection, silent from here on
  const auto asker = ConnectTcpStore("127.0.0.1", server->port(), 5s);
  AnnounceTcpStoreClient(*asker, "worker 0");
  CrashAnnouncedClient(server->port(), "worker 2");
  std::this_thread::sleep_for(300ms);
  const tcp_store::HealthReport report = tcp_store::ReadHealth(*asker, 5s);
  ASSERT_EQ(report.members.size(), 2u);  // worker 2 never asked: no heartbeat of its own
  EXPECT_EQ(report.members[0].name, "worker 0");
  EXPECT_LT(report.members[0].silent_ms, 250);
  EXPECT_EQ(report.members[1].name, "worker 1");
  EXPECT_GE(report.members[1].silent_ms, 300);
  EXPECT_EQ(report.lost, std::vector<std::string>{"worker 2"});
}

}  // namespace
}  // namespace chorus
