// ProcessGroupChorus: torch.distributed's backend "chorus". It rendezvouses through the c10d
// store torch hands it (C10dKvStore), plans chorus's collectives for the job's real shape (each
// rank's host id goes through the store, as MultiWorkerMirroredStrategy does, so
// CHORUS_COMMUNICATION, CHORUS_ALGORITHM, CHORUS_TUNING_FILE, autotuning and the scores all
// apply), creates one chorus::Communicator, and runs every collective on it from one worker
// thread (work_queue.h). send and recv, and gather, scatter and all-to-all, go over an endpoint of
// a chorus transport (p2p_engine.h): CHORUS_P2P_TRANSPORT, else the best-scored for the job.
#ifndef CHORUS_BINDINGS_PYTORCH_PROCESS_GROUP_CHORUS_H_
#define CHORUS_BINDINGS_PYTORCH_PROCESS_GROUP_CHORUS_H_

#include <chorus/collective/communicator.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "p2p_engine.h"
#include "rank_health.h"
#include "work_queue.h"

namespace chorus::torch_backend {

class ProcessGroupChorus : public c10d::ProcessGroup {
 public:
  // Blocks until every rank of the group has created its communicator (or `timeout` passes).
  // Throws chorus's error (a bad CHORUS_* variable, ranks that planned differently, a time-out).
  ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupChorus() override;

  const std::string getBackendName() const override { return "chorus"; }
  // The collective that serves most operations, and why it was picked ("AUTO: ...").
  const std::string& collective() const { return communicator_->backend(); }
  const std::string& plan_source() const { return communicator_->plan().source; }
  // The transport of send, recv, gather, scatter and all-to-all.
  std::string p2p_transport() const { return p2p_->transport(); }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // Throws: a chorus transport receives from a named rank only.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  // Queues `body` as the work of `op`; `outputs` are the work's result.
  c10::intrusive_ptr<c10d::Work> Enqueue(c10d::OpType type, const char* profiling_title,
                                         const std::string& op, std::vector<at::Tensor> inputs,
                                         std::vector<at::Tensor> outputs,
                                         std::chrono::milliseconds timeout,
                                         std::function<void()> body);
  // The work of one batch of point-to-point operations, started on the p2p engine at once.
  c10::intrusive_ptr<c10d::Work> StartP2p(c10d::OpType type, const char* profiling_title,
                                          const std::string& op, std::vector<at::Tensor> tensors,
                                          std::vector<P2pOp> ops);
  // The transport tag of the next collective built from point-to-point operations: apart from
  // every torch tag (those are 32-bit), the same on every rank (they issue collectives in the
  // same order).
  uint64_t NextCollectiveTag() { return (uint64_t{1} << 32) + collective_tags_++; }

  std::chrono::milliseconds timeout_;
  std::unique_ptr<Communicator> communicator_;
  std::unique_ptr<RankHealth> health_;
  // Declared after the communicator and before the queue: outlives the queue's collectives
  // built on it.
  std::unique_ptr<P2pEngine> p2p_;
  std::atomic<uint64_t> collective_tags_{0};
  // Declared after the communicator: destroyed first, so its thread never outlives it.
  std::shared_ptr<WorkQueue> queue_;
};

}  // namespace chorus::torch_backend

#endif  // CHORUS_BINDINGS_PYTORCH_PROCESS_GROUP_CHORUS_H_
