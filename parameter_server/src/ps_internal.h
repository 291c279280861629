// Shared by the parameter-server library's files: the host device, deadlines, the tensor codec,
// gRPC status to chorus::Error, the client of the ps tasks, and what a closure is.
#ifndef CHORUS_PARAMETER_SERVER_SRC_PS_INTERNAL_H_
#define CHORUS_PARAMETER_SERVER_SRC_PS_INTERNAL_H_

#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/parameter_server/parameter_server_strategy.h>
#include <chorus/rendezvous/job_credential.h>
#include <chorus/runtime/tensor.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "parameter_server.grpc.pb.h"

namespace chorus::ps_internal {

using Milliseconds = std::chrono::milliseconds;

// Reads and writes of more bytes than this to one ps are streamed in chunks of this size.
inline constexpr int64_t kStreamChunkBytes = 1 << 20;

// CPU:0, where values arriving from other tasks are put; safe to call while the process exits.
Device HostDevice();
// CHORUS_TIMEOUT_SECONDS, else 60 s.
Milliseconds DefaultTimeout();

// A channel to "host:port" that allows messages of any size.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);
// Server-side limits to match.
void AllowLargeMessages(grpc::ServerBuilder& builder);
// Sets a call's deadline and the job credential it presents (chorus/rendezvous/job_credential.h).
void PrepareCall(grpc::ClientContext& context, Milliseconds timeout,
                 const JobCredential& credential);
void PrepareCall(grpc::ClientContext& context, std::chrono::system_clock::time_point deadline,
                 const JobCredential& credential);
// The metadata key of the credential, and what the credential is for.
inline constexpr const char* kCredentialKey = "chorus-job-credential";
inline constexpr const char* kCredentialPurpose = "parameter-server rpc";

// A failed RPC as chorus::Error: UNAVAILABLE / DEADLINE_EXCEEDED become PEER_LOST / TIMEOUT
// naming `who` ("ps 1 at 127.0.0.1:4000") and what to do.
[[noreturn]] void ThrowRpcError(const grpc::Status& status, const std::string& who,
                                const std::string& what);
bool IsTransportFailure(const grpc::Status& status);

// Waits (up to `timeout`) until the task at `stub` answers a ping as a task of `role` ("ps",
// "worker"); Error naming `who` otherwise: TIMEOUT when it never answered, INVALID_ARGUMENT when
// another role answered.
void AwaitTask(rpc::Task::Stub& stub, const std::string& who, const std::string& role,
               Milliseconds timeout, const JobCredential& credential);
// Tells the tasks to exit, all at once; best effort (a dead task is fine), 2 s at most.
void ShutdownTasks(const std::vector<rpc::Task::Stub*>& tasks, const JobCredential& credential);
// "2.5 s".
std::string Seconds(std::chrono::duration<double> duration);

void ToProto(const Tensor& tensor, rpc::TensorData* out);
Tensor FromProto(const rpc::TensorData& data, const std::string& what);
Shape ShapeOf(const google::protobuf::RepeatedField<int64_t>& dims);

// A span of host memory: a shard's place in a whole value.
struct MutableBytes {
  void* data = nullptr;
  size_t size = 0;
};
struct ConstBytes {
  const void* data = nullptr;
  size_t size = 0;
};

// A variable as every task sees it.
struct VariableInfo {
  std::string name;
  chorus_dtype dtype = CHORUS_F32;
  Shape shape;
  bool trainable = true;
  std::vector<ShardPlacement> shards;
};

// The variables the coordinator created, by name, with a version that bumps on every change.
class Layout {
 public:
  uint64_t version = 0;
  std::vector<std::shared_ptr<const VariableInfo>> variables;
  void ToProto(rpc::Layout* out) const;
  static std::shared_ptr<const Layout> FromProto(const rpc::Layout& layout);
  std::shared_ptr<const VariableInfo> Find(const std::string& name) const;
};

// Stubs to every ps task, shared by the coordinator's and a worker's variables. Each call that
// touches several ps tasks sends one RPC to each, in parallel, and waits for all. A ps that does
// not answer raises PsUnavailable naming it ("ps 1 at host:port"); a call cut short by the
// deadline of the function's run (ForRun), RunDeadlineExceeded; any other failure, Error.
class PsClient {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  PsClient(std::vector<std::string> ps_addresses, Milliseconds timeout);
  // This client (the same channels) for one function's run on a worker: each call's deadline is
  // `timeout`, but no later than `run_deadline`, so that the worker answers the coordinator
  // before the coordinator's deadline for the run passes.
  std::shared_ptr<PsClient> ForRun(Milliseconds timeout, TimePoint run_deadline) const;
  int num_ps() const { return static_cast<int>(addresses_.size()); }
  const std::string& address(int ps) const { return addresses_.at(static_cast<size_t>(ps)); }
  std::string TaskName(int ps) const;  // "ps 1 at 127.0.0.1:4000"
  rpc::Task::Stub& stub(int ps) const { return *stubs_->at(static_cast<size_t>(ps)); }
  Milliseconds timeout() const { return timeout_; }
  // What this process presents to the tasks (from the job's secret when it has one).
  const JobCredential& credential() const { return credential_; }

  // A call's deadline: `timeout` from its start, or the run's deadline when that comes first.
  struct CallDeadline {
    TimePoint started;
    TimePoint at;
    bool by_run = false;
  };
  // Sets `context`'s deadline and credential for a call to a ps.
  CallDeadline Prepare(grpc::ClientContext& context) const;
  // A failed call to ps `ps` as the errors above.
  [[noreturn]] void ThrowCallError(const grpc::Status& status, int ps, const std::string& what,
                                   const CallDeadline& deadline) const;
  // Several calls of one step cut short by the run's deadline: RunDeadlineExceeded naming every
  // ps that had not answered (the stopped one and any merely slow one alike).
  [[noreturn]] void ThrowRunDeadline(const std::vector<std::pair<int, CallDeadline>>& unanswered,
                                     const std::string& what) const;

  // Waits until every ps answers a ping (or `timeout`).
  void WaitForAll(Milliseconds timeout) const;
  void SetOptimizer(const rpc::OptimizerConfig& config) const;
  void CreateShards(const VariableInfo& info, const Tensor& initial) const;
  // Reads shard i's value into destinations[i] (exactly its bytes: a whole value's rows are
  // read in place). More than kStreamChunkBytes stream in chunks, one thread per ps.
  void ReadInto(const std::vector<ShardPlacement>& shards,
                const std::vector<MutableBytes>& destinations) const;
  // Sends sources[i] (shard i's bytes, of `dtype`) to its ps as `kind`, streamed likewise.
  void UpdateFrom(rpc::UpdateRequest::Kind kind, chorus_dtype dtype,
                  const std::vector<ShardPlacement>& shards,
                  const std::vector<ConstBytes>& sources) const;
  std::vector<rpc::SlotState> ReadSlots(const std::vector<ShardPlacement>& shards) const;
  void WriteSlots(const std::vector<ShardPlacement>& shards,
                  const std::vector<rpc::SlotState>& states) const;

 private:
  void ReadStreamed(const std::vector<ShardPlacement>& shards,
                    const std::vector<MutableBytes>& destinations) const;
  void UpdateStreamed(rpc::UpdateRequest::Kind kind, chorus_dtype dtype,
                      const std::vector<ShardPlacement>& shards,
                      const std::vector<ConstBytes>& sources) const;

  std::vector<std::string> addresses_;
  std::shared_ptr<const std::vector<std::unique_ptr<rpc::Task::Stub>>> stubs_;
  Milliseconds timeout_;
  std::optional<TimePoint> run_deadline_;
  JobCredential credential_;
};

// What PsClient throws when a ps does not answer (PEER_LOST, or TIMEOUT past the deadline).
class PsUnavailable : public Error {
 public:
  PsUnavailable(chorus_status status, const std::string& message, int ps)
      : Error(status, message), ps_(ps) {}
  int ps() const { return ps_; }

 private:
  int ps_;
};

// What PsClient throws when the deadline of the function's run came while a call to a ps was
// pending, before the call's own time-out: the function ran out of time, the ps is not known
// to be lost.
class RunDeadlineExceeded : public Error {
 public:
  explicit RunDeadlineExceeded(const std::string& message) : Error(CHORUS_TIMEOUT, message) {}
};

// Where each shard's rows lie in a whole host value of `info`'s dtype and shape.
std::vector<MutableBytes> ShardSpans(const VariableInfo& info, void* whole);
std::vector<ConstBytes> ShardSpans(const VariableInfo& info, const void* whole);

// A whole value split along axis 0 into the shards' rows, and back.
std::vector<Tensor> SplitRows(const Tensor& whole, const std::vector<ShardPlacement>& shards);
Tensor ConcatRows(const VariableInfo& info, const std::vector<Tensor>& parts);

// The cluster's addresses of a job ("ps", "worker"), empty when absent.
std::vector<std::string> JobAddresses(const ClusterResolver& resolver, const std::string& job);

// An error kept across threads: its status and its own copy of the message. (Copies of a
// chorus::Error share libstdc++'s reference-counted message, whose counting TSan cannot see in the
// uninstrumented library: it reported the last copy's free as a race.)
struct Failure {
  chorus_status status = CHORUS_INTERNAL;
  std::string message;
  explicit Failure(const Error& error) : status(error.status()), message(error.what()) {}
  [[noreturn]] void Throw() const { throw Error(status, message); }
};

// One scheduled function, shared by the coordinator's queue and its RemoteValue.
struct ClosureState {
  uint64_t id = 0;
  rpc::RunRequest request;  // all but the layout
  std::mutex mutex;
  std::condition_variable ready;
  bool finished = false;
  std::vector<Tensor> outputs;
  std::optional<Failure> error;
  int worker = -1;
  // The coordinator's, under its mutex: the runs that passed their deadline on a worker that
  // still answered, where, and the last one's cause when the worker told it.
  int deadline_misses = 0;
  std::string missed_on;
  std::string last_miss;
  void Finish(std::vector<Tensor> results, int by_worker);
  void Fail(const Error& failure, int by_worker);
};

}  // namespace chorus::ps_internal

#endif  // CHORUS_PARAMETER_SERVER_SRC_PS_INTERNAL_H_
