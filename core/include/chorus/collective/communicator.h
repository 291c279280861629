// Communicator: the C++ face of the collectives across workers (the core's core_ring or any
// plugin's). It creates every collective its plan names (selection.h) over a rendezvous store,
// runs each operation on the one the plan picks for it (a variable's rule, a fixed name, the
// tuning file, else the best score among those created), resolves MEAN (SUM, then divide by
// size), checks that every rank issues the same operation with the same count and dtype (a
// mismatch is an INVALID_ARGUMENT naming the ranks, never a silent mis-reduce), waits on
// requests with the time-out, and turns failures into chorus::Error: TIMEOUT, PEER_LOST naming
// the lost task, ABORTED. Under autotuning (CHORUS_AUTOTUNE=1, plan.autotune_candidates) it times
// the candidates on the first all-reduces of each size band and then runs the band on the fastest.
#ifndef CHORUS_COMMUNICATOR_H_
#define CHORUS_COMMUNICATOR_H_

#include <chorus/collective/algorithm_rules.h>
#include <chorus/collective/communication_options.h>
#include <chorus/collective/selection.h>
#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/plugin_library.h>
#include <chorus/runtime/registry.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

namespace internal {
class AbortFlag;
struct PluginJob;
}  // namespace internal

struct CommunicatorConfig {
  int rank = 0;
  int size = 1;
  // The job's rendezvous store; the communicator works under a prefix of its own in it.
  std::shared_ptr<KvStore> store;
  // Distinguishes communicators of one job: every rank must pass the same name.
  std::string name = "default";
  double timeout_seconds = 300;
  // Handed to the create of the plan's fixed collective (or, without one, the primary), e.g.
  // {"algorithm", "ring_chunked"}. Every rank must pass the same options (Create checks), except
  // the values of the keys in per_rank_options.
  Options options;
  // Keys of `options` whose values differ between ranks by design, e.g. {"hostname"} when each
  // rank passes its own address (better: `address` below). Their keys must still agree.
  std::vector<std::string> per_rank_options;
  // Where the other ranks reach this one (a host from the cluster spec; "": 127.0.0.1), and
  // which machine it runs on ("": unknown); handed to every collective's create.
  std::string address;
  std::string host_id;
  // How messages name rank r ("worker 2"); empty = "rank r".
  std::vector<std::string> task_names;
  // Exchange each operation's signature (op, count, dtype, reduce op, root, sequence number)
  // before running it. CHORUS_CHECK_COLLECTIVES=0 turns it off (benchmarks).
  bool check_signatures = true;
  // The job's health (job_health.h), or nullptr. A plugin sees only its neighbours, so without it
  // a survivor may name the neighbour that passed the failure on. With it, the communicator is
  // aborted with the real cause as soon as the health thread knows it (a worker died or stopped
  // answering), and an operation that fails with PEER_LOST, TIMEOUT or ABORTED asks it (up to
  // 2 s) who caused it: the error then leads with that worker and keeps the plugin's words after.
  std::shared_ptr<JobHealth> health;
  // Skips the check that every rank created the same collectives (for communicators a plugin
  // composes, whose parent checked).
  bool check_plan = true;
  // The job, as every collective's create sees it (chorus_job, plugin.h 1.6): its id ("": the
  // one the store holds, drawn by the first process that asks; else at most 47 characters of
  // [A-Za-z0-9_.-], as plugins name files after it), this process's index among the job's
  // processes and their number (-1: rank and size).
  std::string job_id;
  int task_index = -1;
  int num_tasks = -1;
};

class Communicator {
 public:
  // First checks (unless config.check_plan is false) that every rank is about to create the
  // same collectives, chosen for the same reasons and rules, from plugins of the same version and
  // ABI, with the same options, since plugin sets and variables can differ between workers: a
  // rank that differs, or cannot create the plan, makes every rank fail at once with
  // INVALID_ARGUMENT naming the difference and both tasks; a rank that does not arrive within the
  // time-out is named (TIMEOUT). Then creates every collective of `plan` from `registry`, in the
  // plan's order. Throws Error with the plugin's message when a create fails.
  static std::unique_ptr<Communicator> Create(const Registry& registry, const CollectivePlan& plan,
                                              const CommunicatorConfig& config);
  // The plan PlanNamed(registry, name, shape) for `name` (a collective's or plugin's name, or
  // "local+cross"), with shape = config.size ranks on one host. For another shape, call
  // PlanNamed (collective/selection.h) and the overload above.
  static std::unique_ptr<Communicator> Create(const Registry& registry, const std::string& name,
                                              const CommunicatorConfig& config);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return config_.rank; }
  int size() const { return config_.size; }
  const std::string& backend() const { return backends_[0].name; }  // the primary collective
  const PluginLibrary& library() const { return *backends_[0].library; }
  const CollectivePlan& plan() const { return plan_; }
  // The collective that runs `op` of `bytes` in `dtype` (nccl-tests' bytes, as in
  // algorithm_rules.h): under autotuning, a band's winner once decided (while it is being tuned,
  // the one the scores pick). Throws Error(UNSUPPORTED) when none of the plan's serves it.
  const std::string& BackendFor(chorus_collective_op op, uint64_t bytes,
                                chorus_dtype dtype = CHORUS_F32) const;
  double timeout_seconds() const { return config_.timeout_seconds; }
  void set_timeout_seconds(double seconds) { config_.timeout_seconds = seconds; }

  // Host memory only in this version. recv may equal send.
  void AllReduce(const void* send, void* recv, size_t count, chorus_dtype dtype,
                 chorus_reduce_op op);
  void Broadcast(void* data, size_t count, chorus_dtype dtype, int root);
  // recv holds size() * count elements, rank r's block at r * count.
  void AllGather(const void* send, void* recv, size_t count, chorus_dtype dtype);
  // send holds size() * recv_count elements; rank r gets the reduction of block r.
  void ReduceScatter(const void* send, void* recv, size_t recv_count, chorus_dtype dtype,
                     chorus_reduce_op op);
  void Barrier();

  // Makes the pending and every later operation fail with `status` (PEER_LOST, ABORTED,
  // TIMEOUT) carrying `reason`: it raises the abort flag the plugins' waits on the operations'
  // threads see (the host's abort_requested) and calls every collective's abort(). The first call
  // wins. Safe from any thread (the job's health thread calls it). A time-out calls it too.
  void Abort(chorus_status status, const std::string& reason);
  // Operations running now (threads inside AllReduce, Broadcast, ...).
  int in_flight() const { return in_flight_.load(); }
  // Waits up to `timeout` until no operation runs; false when one still does.
  bool WaitIdle(std::chrono::milliseconds timeout) const;

  // "worker 2" for rank 2 (from config.task_names), else "rank 2".
  std::string TaskName(int rank) const;

  // Whether autotuning still times the candidates for `op` of `bytes` (its band undecided):
  // the same answer on every rank after the same operations.
  bool Tuning(chorus_collective_op op, uint64_t bytes) const;
  // Autotuning's decisions so far, one line per size band: "all_reduce 64K-256K: shm 12.3 us,
  // core_ring 40.1 us -> shm" (those read from CHORUS_TUNING_CACHE too). Empty without it.
  std::vector<std::string> AutotuneDecisions() const;

 private:
  // One collective's communicator; backends_[0] is the communicator's own, later ones are those
  // the routes name.
  struct Backend {
    std::string name;
    std::shared_ptr<PluginLibrary> library;
    std::string plugins;  // "plugin gloo (path)", or a pair's two plugins, for messages
    const chorus_collective_api* api = nullptr;
    chorus_communicator* handle = nullptr;
    std::unique_ptr<CKvStore> store;
    std::shared_ptr<internal::PluginJob> job;  // what create was handed as job and object_id
  };

  Communicator();
  // One operation on the calling thread: counted in in_flight(), inside the abort scope.
  class Activity;
  // Autotuning's state (plan.autotune_candidates non-empty), in communicator.cc.
  struct Autotune;
  void StartAutotune(const Registry& registry);
  // The backend that runs an all_reduce of `bytes` while its band is tuned, and its candidate
  // slot in *slot; nullptr when autotuning does not decide it.
  const Backend* TunedBackend(uint64_t bytes, size_t* slot);
  // Records a tuned call's time; at the band's last one exchanges the medians and decides.
  void RecordTunedCall(uint64_t bytes, chorus_dtype dtype, size_t slot, double microseconds);
  void AddBackend(const Registry& registry, const std::string& name, const Options& options);
  void CheckPlanAcrossRanks(const Registry& registry);
  const Backend& Route(chorus_collective_op op, chorus_dtype dtype, uint64_t bytes) const;
  void CheckSignature(int op, size_t count, chorus_dtype dtype, chorus_reduce_op reduce, int root,
                      const Backend& routed);
  // Begins an operation with `start`, waits for it under the watchdog (base/watchdog.h) and
  // throws its failure.
  using StartFn = chorus_status (*)(const chorus_collective_api* api, chorus_communicator* handle,
                                    const void* args, chorus_request** request);
  void Run(const Backend& backend, const char* what, StartFn start, const void* args);
  void Finish(const Backend& backend, chorus_status status, chorus_request* request,
              const char* what);
  [[noreturn]] void Fail(const Backend& backend, chorus_status status, const std::string& what,
                         const std::string& detail);
  // Abort's body; true when this call won.
  bool RaiseAbort(chorus_status status, const std::string& reason);
  // Whether an abort was raised, waiting out one that is being raised on another thread.
  bool Aborted() const;

  CommunicatorConfig config_;
  std::string job_id_;
  CollectivePlan plan_;
  std::vector<Backend> backends_;  // fixed after Create, in plan_.collectives' order
  uint64_t sequence_ = 0;
  std::atomic<bool> abort_claimed_{false};  // the first Abort wins
  std::atomic<bool> aborted_{false};        // set after abort_reason_ is written
  std::atomic<chorus_status> abort_status_{CHORUS_OK};
  std::string abort_reason_;  // written once before aborted_ is set
  std::unique_ptr<internal::AbortFlag> abort_flag_;
  std::atomic<int> in_flight_{0};
  JobHealth::Subscription health_subscription_ = 0;
  std::unique_ptr<Autotune> autotune_;
};

}  // namespace chorus

#endif  // CHORUS_COMMUNICATOR_H_
