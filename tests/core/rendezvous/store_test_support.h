// What the rendezvous stores' tests share: timing, errors thrown, threads whose exceptions fail
// the test, temporary directories, and a client that dies without a goodbye.
#ifndef CHORUS_TESTS_CORE_RENDEZVOUS_STORE_TEST_SUPPORT_H_
#define CHORUS_TESTS_CORE_RENDEZVOUS_STORE_TEST_SUPPORT_H_

#include <arpa/inet.h>
#include <chorus/base/error.h>
#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/rendezvous/rendezvous.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include "rendezvous/tcp_store_health.h"
#include "rendezvous/tcp_store_protocol.h"

namespace chorus {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

inline milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

// Runs fn and returns the Error it throws (fails the test when it throws none).
inline Error Thrown(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no chorus::Error thrown";
  return Error(CHORUS_OK, "");
}

// A thread whose exceptions become test failures instead of escaping it.
inline std::thread Spawn(std::function<void()> fn) {
  return std::thread([fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "a thread threw: " << e.what();
    }
  });
}

// A fresh directory under the test temp dir, removed at the end.
class TempDirectory {
 public:
  TempDirectory() {
    std::string pattern = ::testing::TempDir() + "chorus_store_XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Forks a process that connects, announces `name`, then waits to be killed (SIGKILL: no
// destructor, no goodbye, as when a worker crashes).
inline void CrashAnnouncedClient(uint16_t port, const std::string& name) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      const auto store = ConnectTcpStore("127.0.0.1", port, 5s);
      AnnounceTcpStoreClient(*store, name);
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  const ssize_t n = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_EQ(n, 1) << "the child could not connect and announce itself";
}

}  // namespace chorus

#endif  // CHORUS_TESTS_CORE_RENDEZVOUS_STORE_TEST_SUPPORT_H_
