// This process's place in a job of workers: from TF_CONFIG (set by chorus-bench -n,
// chorus-launch or a cluster manager), from mpirun's OMPI_COMM_WORLD_* (or torchrun's)
// variables, or alone. Worker 0 serves the rendezvous store at its address, as
// MultiWorkerMirroredStrategy does; every worker connects to it.
#ifndef CHORUS_TOOLS_BENCH_WORKER_JOB_H_
#define CHORUS_TOOLS_BENCH_WORKER_JOB_H_

#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/rendezvous/rendezvous.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::bench {

struct WorkerJob {
  WorkerJob() = default;
  WorkerJob(WorkerJob&&) = default;
  WorkerJob& operator=(WorkerJob&&) = delete;
  // Stops the health before the server goes, which then need not wait for a stopped worker.
  ~WorkerJob();

  int rank = 0;
  int size = 1;
  std::string source;  // "TFConfigClusterResolver", "OpenMpiClusterResolver", "single process"
  std::string host;    // where peers reach this worker
  std::vector<std::string> task_names;
  // Worker 0 only. Destroyed, it serves on until every other worker has come and left (each says
  // hello with its task name), or the time-out passed, so worker 0 may finish first.
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<KvStore> store;
  // Names the worker that breaks the job (a multi-worker job only); communicators share it.
  std::shared_ptr<JobHealth> health;
};

// Throws chorus::Error when the environment's description is malformed or the store cannot be
// reached within `timeout_seconds`.
WorkerJob JoinJob(double timeout_seconds);

// Runs `check` (names the user gave), joins the job (JoinJob) and runs `body` as this worker,
// turning what they throw into the exit code, with the message on stderr naming the worker:
// std::invalid_argument (bad input) 2, chorus::Error 2 for INVALID_ARGUMENT else 1, any other
// exception 1.
int RunAsWorker(double timeout_seconds, const std::function<void()>& check,
                const std::function<int(WorkerJob&)>& body);

// Whether mpirun started this process (OMPI_COMM_WORLD_SIZE is set).
bool StartedByMpirun();

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_WORKER_JOB_H_
