#include "worker_job.h"

#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace chorus::bench {

namespace {
constexpr const char* kDoneKey = "bench/done";
}  // namespace

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
  if (resolver->is_leader()) job.server = TcpStoreServer::Start(leader_host, leader_port);
  job.store =
      ConnectTcpStore(leader_host, leader_port,
                      std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  return job;
}

void LeaveJob(WorkerJob& job, double timeout_seconds) {
  if (job.size <= 1) return;
  if (job.rank != 0) {
    job.store->Add(kDoneKey, 1);
    return;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (job.store->Add(kDoneKey, 0) < job.size - 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace chorus::bench
