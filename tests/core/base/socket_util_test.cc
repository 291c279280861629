// The address parser every part of the core uses (cluster resolvers, MultiWorkerMirroredStrategy,
// the tcp transport) and listening on a port another program holds.
#include "base/socket_util.h"

#include <chorus/base/error.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace chorus {
namespace {

// "host|port", or the problem ParseHostPort reports.
std::string Parsed(const std::string& address) {
  HostPort split;
  const std::string problem = ParseHostPort(address, &split);
  return problem.empty() ? split.host + "|" + std::to_string(split.port) : problem;
}

TEST(ParseHostPort, NamesAndIPv4) {
  EXPECT_EQ(Parsed("localhost:2222"), "localhost|2222");
  EXPECT_EQ(Parsed("127.0.0.1:1"), "127.0.0.1|1");
  EXPECT_EQ(Parsed("node-3.example.org:65535"), "node-3.example.org|65535");
  EXPECT_EQ(Parsed("a:007"), "a|7");
}

TEST(ParseHostPort, IPv6InBracketsLosesTheBrackets) {
  EXPECT_EQ(Parsed("[::1]:2222"), "::1|2222");
  EXPECT_EQ(Parsed("[fe80::1%lo]:80"), "fe80::1%lo|80");
  EXPECT_EQ(Parsed("[2001:db8::7]:443"), "2001:db8::7|443");
}

TEST(ParseHostPort, BadFormsSayWhatIsWrong) {
  EXPECT_EQ(Parsed("[::1"), "has a '[' without its ']' (write an IPv6 host as '[::1]:2222')");
  EXPECT_EQ(Parsed("[::1]"), "has no port (write it as '[::1]:2222')");
  EXPECT_EQ(Parsed("[::1]:"), "has an empty port");
  EXPECT_EQ(Parsed("[::1]x:80"),
            "has something between ']' and the port's ':' (write an IPv6 host as '[::1]:2222')");
  EXPECT_EQ(Parsed("::1:80"),
            "has an IPv6 host without brackets, which makes the port ambiguous (write it as "
            "'[::1]:80')");
  EXPECT_EQ(Parsed("[]:80"), "has no host");
  EXPECT_EQ(Parsed(":80"), "has no host");
  EXPECT_EQ(Parsed("a]:80"), "has a stray '[' or ']'");
  EXPECT_EQ(Parsed("[a[b]:80"), "has a stray '[' or ']'");
  EXPECT_EQ(Parsed("localhost"), "has no port");
  EXPECT_EQ(Parsed("a:"), "has an empty port");
  EXPECT_EQ(Parsed("a b:80"), "has white space in its host");
  EXPECT_EQ(Parsed("a:http"), "has a port 'http' that is not a number");
  EXPECT_EQ(Parsed("a:-1"), "has a port '-1' that is not a number");
  EXPECT_EQ(Parsed("a:0"), "has a port 0 outside 1..65535");
  EXPECT_EQ(Parsed("[::1]:65536"), "has a port 65536 outside 1..65535");
  EXPECT_EQ(Parsed("a:99999999999999999999"), "has a port 99999999999999999999 outside 1..65535");
}

TEST(JoinHostPort, BracketsAnIPv6HostOnce) {
  EXPECT_EQ(JoinHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(JoinHostPort("[::1]", 80), "[::1]:80");
  EXPECT_EQ(JoinHostPort("127.0.0.1", 80), "127.0.0.1:80");
}

TEST(ListenTcp, APortInUseIsNamedWithTheFix) {
  const UniqueFd taken = ListenTcp("127.0.0.1", 0);
  const uint16_t port = LocalPort(taken.get());
  try {
    ListenTcp("127.0.0.1", port);
    FAIL() << "listened twice on port " << port;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_UNAVAILABLE);
    const std::string p = std::to_string(port);
    EXPECT_EQ(std::string(e.what()),
              "rendezvous: cannot serve the tcp store on 127.0.0.1:" + p + ": port " + p +
                  " is in use by another program (bind: Address already in use); stop that "
                  "program or choose a free port");
  }
}

// An IPv6 host listens and connects with or without brackets, where the machine has ::1.
TEST(ListenTcp, IPv6LoopbackWithAndWithoutBrackets) {
  const int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  const bool has_v6 =
      probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&loopback), sizeof(loopback)) == 0;
  if (probe >= 0) ::close(probe);
  if (!has_v6) GTEST_SKIP() << "this machine has no IPv6 loopback (::1)";
  for (const std::string host : {"::1", "[::1]"}) {
    const UniqueFd listener = ListenTcp(host, 0);
    const uint16_t port = LocalPort(listener.get());
    EXPECT_EQ(LocalEndpoint(listener.get()), "::1:" + std::to_string(port));
    std::string error;
    const UniqueFd client = ConnectTcp(host, port, DeadlineAfter(std::chrono::seconds(5)), &error);
    EXPECT_TRUE(client.valid()) << host << ": " << error;
  }
}

}  // namespace
}  // namespace chorus
