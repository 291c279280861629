// JobHealth: which worker broke the job. A collective sees only its neighbours, so a survivor
// would otherwise name the neighbour that passed the failure on. The leader's TCP store sees
// every worker: JobHealth keeps its own connection to it, announced by this worker's task name,
// and one thread that asks the store every `heartbeat_every` how long it has not heard from each
// worker's health connection and which workers' connections closed without a goodbye (the store
// records them at once); the request itself is this worker's heartbeat. From the answers (and the
// store's own silence) it knows, in task names:
//   - a worker died: its connection closed without a goodbye (PEER_LOST);
//   - a worker stopped answering: its connection is open but silent for longer than the time-out
//     (stopped, hung; TIMEOUT);
//   - the leader died: the store closed the connection (PEER_LOST), or stopped answering: the
//     store has not answered for the time-out (TIMEOUT).
// Silence is measured with steady clocks only (the store's for its answer, this process's since),
// so hosts' clocks never matter. A communicator given a JobHealth (CommunicatorConfig::health) is
// aborted with the cause as soon as it is known, and asks Diagnose when an operation fails.
#ifndef CHORUS_JOB_HEALTH_H_
#define CHORUS_JOB_HEALTH_H_

#include <chorus/plugin.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace chorus {

class TcpStoreServer;

// The real cause of a failed job.
struct JobFailure {
  chorus_status status = CHORUS_OK;  // PEER_LOST: a worker died; TIMEOUT: it stopped answering
  std::string worker;                // its task name ("worker 1"; the first, when several died)
  std::string cause;                 // "worker 1 died: its process ended (...)"
};

struct JobHealthOptions {
  // The leader's TCP store (TcpStoreServer), and the task that serves it ("worker 0").
  std::string host;
  uint16_t port = 0;
  std::string leader_name;
  // This worker's task name, as the others' messages name it ("worker 2").
  std::string task_name;
  // A worker silent this long has stopped answering; also the time-out for connecting. The job's
  // time-out (CommunicationOptions.timeout_seconds), so a stopped worker is reported when a
  // collective waiting for it would time out.
  std::chrono::milliseconds timeout{300000};
  std::chrono::milliseconds heartbeat_every{500};
};

class JobHealth {
 public:
  // Connects to the store (within options.timeout), says hello as options.task_name and starts
  // the health thread. Throws Error as ConnectTcpStore does.
  explicit JobHealth(JobHealthOptions options);
  // Stop()s.
  ~JobHealth();
  JobHealth(const JobHealth&) = delete;
  JobHealth& operator=(const JobHealth&) = delete;

  // Who made an operation fail with `seen` (PEER_LOST, TIMEOUT, ABORTED)? Asks the store at once
  // and waits up to `within` for an answer that names a worker: one that died, or one silent
  // for a few heartbeats (a stopped worker's neighbours time out first, a moment before it is
  // silent for the whole time-out). A TIMEOUT with every worker answering returns nullopt as
  // soon as the store has answered; otherwise nullopt after `within`.
  std::optional<JobFailure> Diagnose(chorus_status seen, std::chrono::milliseconds within);
  // The failure found so far (by the health thread, or by Diagnose), if any.
  std::optional<JobFailure> failure() const;
  // Stops the thread (waiting at most for one request to a store that does not answer:
  // options.timeout) and says goodbye to the store; Diagnose then answers from what is known.
  // The leader passes its server: a worker found to have stopped answering will not leave it, so
  // the server is told not to wait for it (TcpStoreServer::StopWaitingFor). Idempotent.
  void Stop(TcpStoreServer* leader_server = nullptr);

  // `on_failure` is called once, on the health thread, when the thread finds a failure (at once,
  // on this thread, if it already has). It must not call back into this object.
  using Subscription = uint64_t;
  Subscription Subscribe(std::function<void(const JobFailure&)> on_failure);
  // Once it returns, the callback neither runs nor will.
  void Unsubscribe(Subscription subscription);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace chorus

#endif  // CHORUS_JOB_HEALTH_H_
