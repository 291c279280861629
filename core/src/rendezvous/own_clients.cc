#include "rendezvous/own_clients.h"

#include <mutex>
#include <set>

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

}  // namespace chorus::tcp_store
