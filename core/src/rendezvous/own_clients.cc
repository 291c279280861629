#include "rendezvous/own_clients.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <set>

#include "base/hmac_sha256.h"

namespace chorus::tcp_store {
namespace {

// Both leaked on purpose: a store destroyed during static destruction may still look here.
std::mutex& Mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

std::multiset<std::string>& Endpoints() {
  static auto* endpoints = new std::multiset<std::string>;
  return *endpoints;
}

}  // namespace

void AddOwnClient(const std::string& endpoint) {
  if (endpoint.empty()) return;
  std::lock_guard lock(Mutex());
  Endpoints().insert(endpoint);
}

void RemoveOwnClient(const std::string& endpoint) {
  if (endpoint.empty()) return;
  std::lock_guard lock(Mutex());
  auto& endpoints = Endpoints();
  if (auto it = endpoints.find(endpoint); it != endpoints.end()) endpoints.erase(it);
}

bool IsOwnClient(const std::string& endpoint) {
  if (endpoint.empty()) return false;
  std::lock_guard lock(Mutex());
  return Endpoints().count(endpoint) != 0;
}

std::string ThisProcess() {
  static pid_t named_pid = -1;
  static std::string name;
  std::lock_guard lock(Mutex());
  if (named_pid != ::getpid()) {
    named_pid = ::getpid();
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    uint8_t random[4];
    RandomBytes(random, sizeof random);
    char tag[16];
    std::snprintf(tag, sizeof tag, "%02x%02x%02x%02x", random[0], random[1], random[2], random[3]);
    name = "pid " + std::to_string(named_pid) + " on " + host + ", " + tag;
  }
  return name;
}

}  // namespace chorus::tcp_store
