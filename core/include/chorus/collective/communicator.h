// Communicator: the C++ face of a collective backend across workers (the core's core_ring or a
// plugin's: gloo, ring_grpc, nccl, ...). It creates the plugin's communicator over a rendezvous
// store, resolves MEAN (SUM, then divide by size), checks that every rank issues the same
// operation with the same count and dtype (a mismatch is an INVALID_ARGUMENT naming the ranks,
// never a silent mis-reduce), waits on requests with the time-out, and turns failures into
// chorus::Error: TIMEOUT, PEER_LOST naming the lost task, ABORTED.
#ifndef CHORUS_COMMUNICATOR_H_
#define CHORUS_COMMUNICATOR_H_

#include <chorus/collective/algorithm_rules.h>
#include <chorus/collective/communication_options.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/plugin_library.h>
#include <chorus/runtime/registry.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

// The core's reference collective: a ring over the core's own TCP transport. Always present.
inline constexpr const char* kCoreRing = "core_ring";

struct CommunicatorConfig {
  int rank = 0;
  int size = 1;
  // The job's rendezvous store; the communicator works under a prefix of its own in it.
  std::shared_ptr<KvStore> store;
  // Distinguishes communicators of one job: every rank must pass the same name.
  std::string name = "default";
  double timeout_seconds = 300;
  Options options;  // handed to the plugin's create, e.g. {"algorithm", "ring_chunked"}
  // How messages name rank r ("worker 2"); empty = "rank r".
  std::vector<std::string> task_names;
  // Exchange each operation's signature (op, count, dtype, reduce op, root, sequence number)
  // before running it. CHORUS_CHECK_COLLECTIVES=0 turns it off (benchmarks).
  bool check_signatures = true;
  // When an operation fails with PEER_LOST, asked (on the failing thread) which task was lost;
  // returns e.g. "worker 1", or "" when it cannot tell. A plugin sees only its neighbours, so
  // without this a survivor may name the neighbour that passed the failure on.
  std::function<std::string()> lost_peers;
  // Per operation and size, another collective to run it (CHORUS_ALGORITHM's rules; see
  // algorithm_rules.h). Every collective named is created with this communicator, on every rank;
  // sizes no rule covers run on `name`. Empty: `name` runs everything.
  std::vector<AlgorithmRule> routes;
  // Options for a collective a route names (its own address option, say); `options` is for
  // `name` only. Unset: routed collectives get no options.
  std::function<Options(const std::string& collective)> options_for;
};

class Communicator {
 public:
  // Creates the collective called `name` (interface or plugin name, or "local+cross" for the
  // hierarchical collective, whose two parts come from Registry::Global()) from `registry`. Throws
  // Error listing the available names when it is unknown, or with the plugin's message when its
  // create fails (TIMEOUT when a rank did not arrive).
  static std::unique_ptr<Communicator> Create(const Registry& registry, const std::string& name,
                                              const CommunicatorConfig& config);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return config_.rank; }
  int size() const { return config_.size; }
  const std::string& backend() const { return backends_[0].name; }  // the collective's name
  const PluginLibrary& library() const { return *backends_[0].library; }
  // The collective that runs `op` on `bytes` (nccl-tests' bytes, as in algorithm_rules.h).
  const std::string& BackendFor(chorus_collective_op op, uint64_t bytes) const;
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

  // Makes the pending and every later operation fail with PEER_LOST (or ABORTED) carrying
  // `reason`. Safe from any thread (the health monitor calls it).
  void Abort(chorus_status status, const std::string& reason);

  // "worker 2" for rank 2 (from config.task_names), else "rank 2".
  std::string TaskName(int rank) const;

 private:
  // One collective's communicator; backends_[0] is the communicator's own, later ones are those
  // the routes name.
  struct Backend {
    std::string name;
    std::shared_ptr<PluginLibrary> library;
    const chorus_collective_api* api = nullptr;
    chorus_communicator* handle = nullptr;
    std::unique_ptr<CKvStore> store;
  };

  Communicator() = default;
  void AddBackend(const Registry& registry, const std::string& name, const Options& options);
  const Backend& Route(chorus_collective_op op, uint64_t bytes) const;
  void CheckSignature(int op, size_t count, chorus_dtype dtype, chorus_reduce_op reduce, int root);
  void Finish(const Backend& backend, chorus_status status, chorus_request* request,
              const char* what);
  [[noreturn]] void Fail(const Backend& backend, chorus_status status, const std::string& what,
                         const std::string& detail);

  CommunicatorConfig config_;
  std::vector<Backend> backends_;                         // fixed after Create
  std::vector<std::pair<AlgorithmRule, size_t>> routes_;  // rule, index into backends_
  uint64_t sequence_ = 0;
  std::atomic<bool> abort_claimed_{false};  // the first Abort wins
  std::atomic<bool> aborted_{false};        // set after abort_reason_ is written
  std::atomic<chorus_status> abort_status_{CHORUS_OK};
  std::string abort_reason_;  // written once before aborted_ is set
};

// Names of every collective available (core_ring first).
std::vector<std::string> CollectiveNames(const Registry& registry);

// The name of the collective `name` selects: a collective's own name for its name or its
// plugin's; for "local+cross" (e.g. "shm+gloo") the builtin hierarchical collective composing
// those two, in canonical form. Throws Error(INVALID_ARGUMENT) listing the available names when
// one is unknown.
std::string CanonicalCollectiveName(const Registry& registry, const std::string& name);

// The options that tell `collective` at which host its peers reach this worker: gloo's
// "hostname", core_ring's and ring_grpc's "host", passed on as "local.<key>" / "cross.<key>" for a
// hierarchical "local+cross"; none for other collectives.
Options AddressOptionsFor(const std::string& collective, const std::string& host);

// How a job's workers sit on hosts, for AUTO: hosts = 1 means one host; workers_per_host = 0
// means hosts run different numbers of workers (or it is not known).
struct HostLayout {
  int hosts = 0;
  int workers_per_host = 0;
};

// Which collective a multi-worker strategy uses, and why: CommunicationOptions.implementation
// when it is not AUTO > CHORUS_COMMUNICATION (AUTO, RING, NCCL or a collective's name) > the
// default rule (AUTO). AUTO, by the figures chorus-bench measured (README): nccl when every
// device is a CUDA GPU and the plugin is present; else shm when every worker runs on one host and
// the plugin is present; else, when several hosts run the same number (> 1) of workers each and
// shm is present, shm within hosts and core_ring across them ("shm+core_ring"); else core_ring.
// RING: ring_grpc when present, else core_ring. A name may be "local+cross"
// (CanonicalCollectiveName). An unknown name is an error listing the available ones.
struct CollectiveSelection {
  std::string name;
  std::string source;
};
CollectiveSelection SelectCollective(const Registry& registry,
                                     CommunicationImplementation implementation,
                                     const std::vector<Device>& local_devices,
                                     HostLayout layout = {});

}  // namespace chorus

#endif  // CHORUS_COMMUNICATOR_H_
