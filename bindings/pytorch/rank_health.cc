#include "rank_health.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace chorus::torch_backend {
namespace {

constexpr auto kBeatEvery = std::chrono::milliseconds(500);

// State and start time (clock ticks since boot) of process `pid`, from /proc/<pid>/stat; false
// when there is no such process. The command name, in parentheses, may hold spaces.
bool ProcessState(long long pid, char* state, std::string* start_time) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!file || !std::getline(file, text)) return false;
  const size_t end_of_name = text.rfind(')');
  if (end_of_name == std::string::npos) return false;
  std::istringstream fields(text.substr(end_of_name + 1));
  std::string field;
  // Fields from 3 (state) on; the start time is field 22.
  for (int number = 3; number <= 22 && fields >> field; ++number) {
    if (number == 3) *state = field.empty() ? '?' : field[0];
    if (number == 22) *start_time = field;
  }
  return !start_time->empty();
}

}  // namespace

RankHealth::RankHealth(std::shared_ptr<KvStore> store, std::string scope, int rank,
                       std::vector<std::string> host_ids, std::vector<std::string> names,
                       std::chrono::milliseconds timeout)
    : store_(std::move(store)),
      scope_(std::move(scope)),
      rank_(rank),
      host_ids_(std::move(host_ids)),
      names_(std::move(names)) {
  const long long pid = getpid();
  char state = '?';
  std::string start_time;
  ProcessState(pid, &state, &start_time);
  store_->Set(scope_ + "process/" + std::to_string(rank_),
              ToBytes(std::to_string(pid) + " " + start_time));
  const int size = static_cast<int>(host_ids_.size());
  pids_.assign(size, 0);
  start_times_.assign(size, "");
  for (int r = 0; r < size; ++r) {
    std::istringstream process(
        ToString(store_->Get(scope_ + "process/" + std::to_string(r), timeout)));
    process >> pids_[r] >> start_times_[r];
  }
  beat_ = std::thread([this] { Beat(); });
}

RankHealth::~RankHealth() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  beat_.join();
}

void RankHealth::Beat() {
  const std::string key = scope_ + "beat/" + std::to_string(rank_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    try {
      store_->Add(key, 1);
    } catch (const std::exception&) {
      // The store's server is gone (its process died): the others' diagnoses say so.
      return;
    }
    lock.lock();
    stop_.wait_for(lock, kBeatEvery, [this] { return stopping_; });
  }
}

bool RankHealth::FailedItself(int rank) const {
  try {
    return store_->Check(scope_ + "failed/" + std::to_string(rank));
  } catch (const std::exception&) {
    return false;
  }
}

std::string RankHealth::LocalDeaths() const {
  std::string dead;
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || host_ids_[r] != host_ids_[rank_] || pids_[r] <= 0) {
      continue;
    }
    char state = '?';
    std::string start_time;
    const bool exists = ProcessState(pids_[r], &state, &start_time);
    // Gone, a zombie (exited, not yet reaped), or another process under a reused id.
    if (exists && state != 'Z' && state != 'X' && start_time == start_times_[r]) continue;
    // It saw the failure before it ended (its program gave up): not the rank that broke the job.
    if (FailedItself(static_cast<int>(r))) continue;
    if (!dead.empty()) dead += "; ";
    dead += names_[r] + " (pid " + std::to_string(pids_[r]) + " on this host) died: its process " +
            (exists && start_time == start_times_[r] ? "has exited" : "no longer exists");
  }
  return dead;
}

std::string RankHealth::Diagnose(std::chrono::milliseconds within) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!cause_.empty()) return cause_;
  }
  // This rank saw a failure: if it ends now, the others must not take it for the cause.
  try {
    store_->Set(scope_ + "failed/" + std::to_string(rank_), ToBytes("1"));
  } catch (const std::exception&) {
    // The store is gone: nobody can ask it either.
  }
  std::string cause = LocalDeaths();
  std::vector<int> remote;  // every other rank: a process on this host may be stopped
  for (size_t r = 0; r < host_ids_.size(); ++r) {
    if (static_cast<int>(r) != rank_ && !FailedItself(static_cast<int>(r))) {
      remote.push_back(static_cast<int>(r));
    }
  }
  if (cause.empty() && !remote.empty()) {
    // Whose heartbeat stands still while time passes?
    try {
      std::vector<int64_t> first;
      for (int r : remote) first.push_back(store_->Add(scope_ + "beat/" + std::to_string(r), 0));
      const auto deadline = std::chrono::steady_clock::now() + within;
      std::vector<bool> moved(remote.size(), false);
      size_t still = remote.size();
      while (still > 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(kBeatEvery / 2);
        for (size_t i = 0; i < remote.size(); ++i) {
          if (moved[i]) continue;
          if (store_->Add(scope_ + "beat/" + std::to_string(remote[i]), 0) != first[i]) {
            moved[i] = true;
            --still;
          }
        }
      }
      // Only a verdict when the wait was long enough for several heartbeats.
      if (within >= 3 * kBeatEvery) {
        for (size_t i = 0; i < remote.size(); ++i) {
          if (moved[i]) continue;
          if (!cause.empty()) cause += "; ";
          const bool here = host_ids_[remote[i]] == host_ids_[rank_];
          cause += names_[remote[i]] + " (" +
                   (here ? "pid " + std::to_string(pids_[remote[i]]) + " on this host"
                         : "on host " + host_ids_[remote[i]]) +
                   ") stopped answering: its heartbeat in the store stood still for " +
                   std::to_string(within.count()) + " ms (it died, or it is stopped or hangs)";
        }
      }
    } catch (const std::exception&) {
      // The store does not answer: nothing to add to the operation's own message.
    }
  }
  if (!cause.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cause_.empty()) cause_ = cause;
    return cause_;
  }
  return "";
}

}  // namespace chorus::torch_backend
