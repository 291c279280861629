#include "worker_job.h"

#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace chorus::bench {

bool StartedByMpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

WorkerJob JoinJob(double timeout_seconds) {
  WorkerJob job;
  const auto resolver = ResolveClusterFromEnvironment();
  if (resolver == nullptr) {
    job.source = "single process";
    job.host = "127.0.0.1";
    job.task_names = {"worker 0"};
    job.store = MakeInProcessStore();
    return job;
  }
  job.source = resolver->name();
  job.rank = resolver->id_in_cluster();
  job.size = resolver->num_workers();
  for (int w = 0; w < job.size; ++w) job.task_names.push_back(resolver->TaskNameOf(w));
  const auto split = [](const std::string& address) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) {
      throw Error(CHORUS_INVALID_ARGUMENT, "address '" + address + "' has no port (host:port)");
    }
    return std::make_pair(address.substr(0, colon),
                          static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  };
  job.host = split(resolver->AddressOf(job.rank)).first;
  const auto [leader_host, leader_port] = split(resolver->leader_address());
  const std::chrono::milliseconds timeout(static_cast<int64_t>(timeout_seconds * 1000));
  if (resolver->is_leader()) {
    job.server = TcpStoreServer::Start(leader_host, leader_port, timeout, job.size - 1);
  }
  job.store = ConnectTcpStore(leader_host, leader_port, timeout);
  AnnounceTcpStoreClient(*job.store, job.task_names[static_cast<size_t>(job.rank)]);
  JobHealthOptions health;
  health.host = leader_host;
  health.port = leader_port;
  health.leader_name = job.task_names[0];
  health.task_name = job.task_names[static_cast<size_t>(job.rank)];
  health.timeout = timeout;
  job.health = std::make_shared<JobHealth>(health);
  return job;
}

int RunAsWorker(double timeout_seconds, const std::function<void()>& check,
                const std::function<int(WorkerJob&)>& body) {
  std::string who = "chorus-bench";
  try {
    check();
    WorkerJob job = JoinJob(timeout_seconds);
    if (job.size > 1) who += " (worker " + std::to_string(job.rank) + ")";
    return body(job);
  } catch (const std::invalid_argument& e) {
    std::cerr << who << ": " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << who << ": " << StatusName(e.status()) << ": " << e.what() << "\n";
    return e.status() == CHORUS_INVALID_ARGUMENT ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << who << ": " << e.what() << "\n";
    return 1;
  }
}

WorkerJob::~WorkerJob() {
  if (health) health->Stop(server.get());
}

}  // namespace chorus::bench
