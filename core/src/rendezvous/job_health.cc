#include <chorus/base/error.h>
#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/rendezvous.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/socket_util.h"
#include "base/text.h"
#include "rendezvous/tcp_store_health.h"

namespace chorus {
namespace {

using std::chrono::milliseconds;

// Diagnose's requests come no closer together than this, so a survivor waiting for the store to
// record a death does not flood it.
constexpr milliseconds kMinPollGap{20};
// A worker silent for this many heartbeats is a suspect when an operation has failed.
constexpr int kSuspectHeartbeats = 4;
constexpr milliseconds kSuspectAtLeast{2000};

std::string Seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

struct JobHealth::State {
  JobHealthOptions options;
  std::string address;  // the store's, host:port
  std::shared_ptr<KvStore> store;
  std::thread thread;

  mutable std::mutex mutex;
  std::condition_variable changed;  // a poll ended, a poll is wanted, or stopping
  bool stopping = false;
  bool poll_now = false;
  uint64_t polls_started = 0;
  uint64_t polls_done = 0;
  bool asking = false;             // a request is out
  Clock::time_point last_answer;   // when the store last answered (this process's clock)
  tcp_store::HealthReport report;  // its last answer
  std::optional<JobFailure> verdict;

  std::mutex callbacks_mutex;  // held while the callbacks run; guards the three below
  std::map<Subscription, std::function<void(const JobFailure&)>> callbacks;
  Subscription next_subscription = 1;
  std::optional<JobFailure> published;  // what the callbacks were called with

  // The leader's store keeps the connection open but has not answered for `silent`.
  JobFailure LeaderSilent(Clock::duration silent) const {
    return JobFailure{CHORUS_TIMEOUT, options.leader_name,
                      options.leader_name + " is alive but has not answered for " +
                          Seconds(silent) + " (its process is stopped or hung: the rendezvous " +
                          "store it serves at " + address +
                          " keeps the connection open but answers nothing)"};
  }

  // A worker silent for longer than `threshold`, or the store itself, when it has not answered
  // for as long. Called with `mutex` held.
  std::optional<JobFailure> Silent(Clock::time_point now, Clock::duration threshold) const {
    if (asking && now - last_answer > threshold) return LeaderSilent(now - last_answer);
    const tcp_store::MemberSilence* most = nullptr;
    for (const auto& member : report.members) {
      if (member.name == options.task_name) continue;
      if (most == nullptr || member.silent_ms > most->silent_ms) most = &member;
    }
    if (most == nullptr) return std::nullopt;
    const Clock::duration silent = milliseconds(most->silent_ms) + (now - last_answer);
    if (silent <= threshold) return std::nullopt;
    return JobFailure{CHORUS_TIMEOUT, most->name,
                      most->name + " is alive but has not answered for " + Seconds(silent) +
                          " (its process is stopped or hung: its connection to the rendezvous "
                          "store at " +
                          address + " is open but silent)"};
  }

  // What the last answer says for sure. Called with `mutex` held.
  std::optional<JobFailure> Known(Clock::time_point now) const {
    std::vector<std::string> lost;
    for (const std::string& name : report.lost) {
      if (name != options.task_name) lost.push_back(name);
    }
    if (lost.size() == 1) {
      return JobFailure{CHORUS_PEER_LOST, lost.front(),
                        lost.front() + " died: its process ended (its connection to the " +
                            "rendezvous store closed without a goodbye); the job cannot continue " +
                            "without it"};
    }
    if (!lost.empty()) {
      return JobFailure{CHORUS_PEER_LOST, lost.front(),
                        ListOf(lost) + " died: their processes ended (their connections to " +
                            "the rendezvous store closed without a goodbye); the job cannot " +
                            "continue without them"};
    }
    return Silent(now, options.timeout);
  }

  // The health request failed: the store did not answer in time, or its connection closed.
  JobFailure StoreFailed(const Error& error) const {
    Log().debug("job health: the store at {} failed: {}", address, error.what());
    if (error.status() == CHORUS_TIMEOUT) return LeaderSilent(Clock::now() - last_answer);
    return JobFailure{CHORUS_PEER_LOST, options.leader_name,
                      options.leader_name + " died: the rendezvous store it serves at " + address +
                          " closed the connection (its process ended); the job cannot continue " +
                          "without it"};
  }

  void Run() {
    Clock::time_point last_poll = Clock::now();  // the constructor's
    Clock::time_point next_poll = last_poll + options.heartbeat_every;
    bool told = false;  // the callbacks
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait_until(lock, next_poll, [&] { return stopping || poll_now; });
        if (stopping) return;
        if (poll_now) {
          // A wanted poll, but not sooner than kMinPollGap after the last one.
          changed.wait_until(lock, last_poll + kMinPollGap, [&] { return stopping; });
          if (stopping) return;
        }
        poll_now = false;
        asking = true;
        ++polls_started;
      }
      last_poll = Clock::now();
      std::optional<tcp_store::HealthReport> answer;
      std::optional<JobFailure> store_failure;
      try {
        answer = tcp_store::ReadHealth(*store, options.timeout);
      } catch (const Error& e) {
        store_failure = StoreFailed(e);
      } catch (const std::exception& e) {
        store_failure = StoreFailed(Error(CHORUS_INTERNAL, e.what()));
      }
      std::optional<JobFailure> found;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (stopping) return;
        asking = false;
        ++polls_done;
        if (answer) {
          last_answer = Clock::now();
          report = std::move(*answer);
          found = Known(last_answer);
        } else {
          found = store_failure;
        }
        if (found && !verdict) verdict = found;
        found = verdict;
      }
      changed.notify_all();
      if (found && !told) {
        told = true;
        Log().debug("job health: {}", found->cause);
        std::lock_guard<std::mutex> lock(callbacks_mutex);
        published = found;
        for (const auto& [id, callback] : callbacks) callback(*found);
      }
      // Without the store there is nothing more to learn; otherwise this worker's heartbeat goes
      // on, so the others do not take it for stopped.
      if (store_failure) return;
      next_poll = last_poll + options.heartbeat_every;
    }
  }
};

JobHealth::JobHealth(JobHealthOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  s.address = JoinHostPort(s.options.host, s.options.port);
  s.store = ConnectTcpStore(s.options.host, s.options.port, s.options.timeout);
  AnnounceTcpStoreClient(*s.store, s.options.task_name);
  // The first heartbeat before this worker can take part in anything, so the others can always
  // tell when it falls silent.
  s.report = tcp_store::ReadHealth(*s.store, s.options.timeout);
  s.last_answer = Clock::now();
  s.thread = std::thread([&s] { s.Run(); });
}

JobHealth::~JobHealth() { Stop(); }

void JobHealth::Stop(TcpStoreServer* leader_server) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->changed.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  try {
    LeaveTcpStore(*state_->store);
  } catch (const std::exception& e) {
    Log().debug("job health: leaving the store: {}", e.what());
  }
  if (const auto found = failure(); leader_server && found && found->status == CHORUS_TIMEOUT) {
    leader_server->StopWaitingFor(found->worker);
  }
}

std::optional<JobFailure> JobHealth::failure() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->verdict;
}

std::optional<JobFailure> JobHealth::Diagnose(chorus_status seen, milliseconds within) {
  State& s = *state_;
  const Clock::time_point deadline = DeadlineAfter(within);
  const Clock::duration suspect_after = std::min<Clock::duration>(
      s.options.timeout,
      std::max<Clock::duration>(kSuspectAtLeast, s.options.heartbeat_every * kSuspectHeartbeats));
  std::unique_lock<std::mutex> lock(s.mutex);
  // An answer to a request sent from now on.
  uint64_t wanted = s.polls_started + 1;
  s.poll_now = true;
  s.changed.notify_all();
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (s.verdict) return s.verdict;
    if (auto silent = s.Silent(now, suspect_after)) {
      // An operation failed while this worker was silent: the job's verdict, which the health
      // thread passes on at its next turn.
      s.verdict = silent;
      return silent;
    }
    if (s.polls_done >= wanted) {
      // A time-out with every worker answering has another cause (a worker busy elsewhere, a
      // program that issues other operations). A lost peer is recorded at once, but the store's
      // answer may have crossed it: ask again.
      if (seen == CHORUS_TIMEOUT) return std::nullopt;
      wanted = s.polls_started + 1;
      s.poll_now = true;
      s.changed.notify_all();
    }
    if (now >= deadline || s.stopping) return std::nullopt;
    s.changed.wait_until(lock, std::min(deadline, now + milliseconds(50)));
  }
}

JobHealth::Subscription JobHealth::Subscribe(std::function<void(const JobFailure&)> on_failure) {
  std::lock_guard<std::mutex> lock(state_->callbacks_mutex);
  const Subscription id = state_->next_subscription++;
  if (state_->published) on_failure(*state_->published);
  state_->callbacks.emplace(id, std::move(on_failure));
  return id;
}

void JobHealth::Unsubscribe(Subscription subscription) {
  std::lock_guard<std::mutex> lock(state_->callbacks_mutex);
  state_->callbacks.erase(subscription);
}

}  // namespace chorus
