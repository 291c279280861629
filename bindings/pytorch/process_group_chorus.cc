#include "process_group_chorus.h"

#include <arpa/inet.h>
#include <c10/util/Exception.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/collective/selection.h>
#include <chorus/rendezvous/job_credential.h>
#include <chorus/runtime/registry.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <sstream>

#include "c10d_kv_store.h"
#include "tensor_args.h"

namespace chorus::torch_backend {
namespace {

using std::chrono::milliseconds;

// How long a failed operation waits to learn which rank broke the job: a few heartbeats.
constexpr milliseconds kDiagnoseWithin{2000};

// The address of this machine's interface that routes toward `host` (where the TCPStore
// listens), for the other ranks to reach this one; "" when there is no such route. Connecting a
// UDP socket sends nothing: it only makes the kernel pick the route.
std::string LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return "";
  std::string address;
  for (addrinfo* at = found; at != nullptr && address.empty(); at = at->ai_next) {
    const int fd = socket(at->ai_family, at->ai_socktype, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {};
    if (connect(fd, at->ai_addr, at->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      const void* raw =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) address = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return address;
}

std::string ThisHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

std::string RankName(int rank) { return "rank " + std::to_string(rank); }

// The transport of the point-to-point operations: CHORUS_P2P_TRANSPORT, else the one that scores
// highest for carrying a 1 MiB broadcast in this job's shape (what a transport's score is asked
// for; shared memory wins on one host where it is loaded), the first loaded on a tie: the core's
// tcp, which every registry has.
Registry::TransportImplementation P2pTransport(const Registry& registry, const JobShape& shape) {
  if (const auto name = GetEnv("CHORUS_P2P_TRANSPORT")) {
    return registry.FindTransport(*name, "CHORUS_P2P_TRANSPORT");
  }
  const chorus_score_args args =
      ScoreArgs(CHORUS_OP_BROADCAST, CHORUS_U8, uint64_t{1} << 20, shape, CHORUS_REQUEST_AUTO);
  const Registry::TransportImplementation* best = nullptr;
  Score best_score;
  for (const auto& transport : registry.transports()) {
    if (transport.api->capabilities == nullptr) continue;  // chosen by name only
    chorus_capabilities capabilities = *transport.api->capabilities;
    capabilities.ops = CHORUS_OP_BIT(CHORUS_OP_BROADCAST);  // a transport's ops are not read
    const Score score = ScoreOf(&capabilities, args);
    if (score.value == 0) continue;
    if (best == nullptr || RanksAbove(score, best_score)) {
      best = &transport;
      best_score = score;
    }
  }
  if (best == nullptr) return registry.transports().front();
  return *best;
}

size_t ByteCount(const at::Tensor& tensor) { return tensor.numel() * tensor.element_size(); }

// A send or a receive of `tensor`'s bytes (a dense, contiguous CPU tensor).
P2pOp Transfer(bool send, int peer, uint64_t tag, const at::Tensor& tensor) {
  return P2pOp{send, peer, tag, tensor.data_ptr(), ByteCount(tensor)};
}

void CheckRank(int64_t rank, int size, const std::string& op, const char* what) {
  TORCH_CHECK(rank >= 0 && rank < size, "chorus: ", op, ": ", what, " ", rank,
              " is not a rank of this group of ", size);
}

// A contiguous copy of `tensors`, one after the other (what a list-of-tensors op sends).
at::Tensor Flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies `flat`'s consecutive blocks back into `tensors`.
void Unflatten(const at::Tensor& flat, std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (auto& t : tensors) {
    t.view({-1}).copy_(flat.narrow(0, offset, t.numel()));
    offset += t.numel();
  }
}

// What rank `rank` published under `key` in the group's store, waiting up to `timeout` for it.
Bytes GetFromRank(KvStore& kv, const std::string& key, int rank, milliseconds timeout) {
  try {
    return kv.Get(key, timeout);
  } catch (const Error& e) {
    if (e.status() != CHORUS_TIMEOUT) throw;
    std::ostringstream seconds;
    seconds << static_cast<double>(timeout.count()) / 1000.0;
    throw Error(CHORUS_TIMEOUT, RankName(rank) +
                                    " did not create its chorus process group within " +
                                    seconds.str() + " s (" + e.what() + ")");
  }
}

// Every rank must hold the job's secret (CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE), or none:
// torch's store admits any process, and not every collective or transport reads the secret (shm
// and ucx do not), so the group compares the ranks' secrets before anything else. Each rank
// publishes HMAC(secret, purpose) ("none" without a secret, or why it cannot use its own); the
// token shows nothing of the secret, and it is a check that the ranks agree, not a proof: the
// transports that authenticate (the core's tcp) still prove the secret by challenge-response.
void CheckSameJobSecret(KvStore& kv, const std::string& scope, int rank, int size,
                        milliseconds timeout) {
  std::string mine;
  std::string source;
  std::exception_ptr own_error;
  try {
    const JobCredential credential = JobCredentialFor("chorus_torch process group", "");
    mine = credential.required ? "token " + credential.token : "none";
    source = credential.source;
  } catch (const Error& e) {
    mine = std::string("error ") + e.what();
    own_error = std::current_exception();
  }
  kv.Set(scope + "secret/" + std::to_string(rank), ToBytes(mine));
  if (own_error) std::rethrow_exception(own_error);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const std::string theirs =
        ToString(GetFromRank(kv, scope + "secret/" + std::to_string(r), r, timeout));
    if (theirs == mine) continue;
    std::string why;
    if (theirs.rfind("error ", 0) == 0) {
      why = RankName(r) + " cannot use its job secret: " + theirs.substr(6);
    } else if (theirs == "none") {
      why = RankName(r) + " has no job secret but " + RankName(rank) + " has one (" + source +
            "); " + JobSecretHint();
    } else if (mine == "none") {
      why =
          RankName(rank) + " has no job secret but " + RankName(r) + " has one; " + JobSecretHint();
    } else {
      why = RankName(r) + " holds another job secret than " + RankName(rank) + " (" + source +
            "); " + JobSecretHint();
    }
    throw Error(CHORUS_INVALID_ARGUMENT, why);
  }
}

}  // namespace

ProcessGroupChorus::ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout) {
  auto kv = std::make_shared<C10dKvStore>(store);
  // torch hands each group a store of its own (a PrefixStore); the count keeps the keys of a
  // second group made over the same store apart all the same.
  const int64_t use = kv->Add("chorus/groups/" + std::to_string(rank), 1);
  const std::string scope = "chorus/" + std::to_string(use) + "/";
  CheckSameJobSecret(*kv, scope, rank, size, timeout);

  // The job's shape from every rank's host id (CHORUS_HOST_ID, or hostname/boot-id): shared
  // memory within a host, composition across hosts, the tuning file's [workers hosts] section.
  const std::string host_id = HostIdentity();
  kv->Set(scope + "host/" + std::to_string(rank), ToBytes(host_id));
  std::vector<std::string> host_ids;
  for (int r = 0; r < size; ++r) {
    host_ids.push_back(ToString(GetFromRank(*kv, scope + "host/" + std::to_string(r), r, timeout)));
  }
  const JobShape shape = JobShape::FromHostIds(host_ids, "host");
  std::vector<std::string> rank_names;
  for (int r = 0; r < size; ++r) rank_names.push_back(RankName(r));
  health_ =
      std::make_unique<RankHealth>(kv, scope + "health/", rank, host_ids, rank_names, timeout);
  const CollectivePlan plan =
      PlanCollectives(Registry::Global(), CommunicationImplementation::kAuto, shape);

  CommunicatorConfig config;
  config.rank = rank;
  config.size = size;
  config.store = WithPrefix(kv, scope);
  config.name = "torch";
  config.timeout_seconds = static_cast<double>(timeout.count()) / 1000.0;
  config.host_id = host_id;
  // Where the others reach this rank: the interface toward the TCPStore's host; without one, on
  // several hosts, this host's name (a lone host: 127.0.0.1, the default).
  const std::string store_host = C10dKvStore::TcpStoreHost(store);
  if (!store_host.empty()) config.address = LocalAddressToward(store_host);
  if (config.address.empty() && shape.hosts > 1) config.address = ThisHostName();
  config.task_names = rank_names;
  communicator_ = Communicator::Create(Registry::Global(), plan, config);

  // The point-to-point endpoint. Every rank must pick the same transport: a rank that would
  // pick another (a plugin missing on its host, another CHORUS_P2P_TRANSPORT) is named.
  const auto transport = P2pTransport(Registry::Global(), shape);
  const std::string transport_name = transport.api->name;
  kv->Set(scope + "p2p/transport/" + std::to_string(rank), ToBytes(transport_name));
  for (int r = 0; r < size; ++r) {
    const std::string theirs =
        ToString(kv->Get(scope + "p2p/transport/" + std::to_string(r), timeout));
    if (theirs != transport_name) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "the ranks picked different transports for send and recv: " + RankName(rank) +
                      " '" + transport_name + "', " + RankName(r) + " '" + theirs +
                      "'; load the same plugins on every host, or set CHORUS_P2P_TRANSPORT to "
                      "the same name everywhere");
    }
  }
  auto p2p_store = std::make_unique<CKvStore>(WithPrefix(kv, scope + "p2p/"));
  TransportConfig transport_config;
  transport_config.rank = rank;
  transport_config.size = size;
  transport_config.store = p2p_store->get();
  transport_config.timeout_ms = timeout.count();
  transport_config.address = config.address;
  transport_config.host_id = host_id;
  auto endpoint = TransportEndpoint::Create(transport.plugin, *transport.api, transport_config);
  p2p_ = std::make_unique<P2pEngine>(std::move(p2p_store), std::move(endpoint), config.task_names,
                                     timeout);
  queue_ = std::make_shared<WorkQueue>();
  init();
}

// The queue runs what is queued and stops before the communicator and the p2p engine its items
// use go (a Work still held may keep the stopped queue itself alive).
ProcessGroupChorus::~ProcessGroupChorus() { queue_->Stop(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::Enqueue(
    c10d::OpType type, const char* profiling_title, const std::string& op,
    std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs, milliseconds timeout,
    std::function<void()> body) {
  auto work = c10::make_intrusive<ChorusWork>(
      rank_, type, profiling_title, op, std::move(inputs), std::move(outputs),
      timeout == c10d::kUnsetTimeout ? kNoTimeout : timeout);
  // A collective sees only its neighbours: when it fails for a lost or silent peer, the message
  // leads with the rank that broke the job (RankHealth), not the neighbour that passed it on.
  RankHealth* health = health_.get();
  auto diagnosed = [body = std::move(body), health] {
    try {
      body();
    } catch (const Error& e) {
      if (e.status() != CHORUS_PEER_LOST && e.status() != CHORUS_TIMEOUT &&
          e.status() != CHORUS_ABORTED) {
        throw;
      }
      const std::string cause = health->Diagnose(kDiagnoseWithin);
      if (cause.empty()) throw;
      throw Error(e.status(), cause + " (this rank saw: " + e.what() + ")");
    }
  };
  queue_->Push(work, std::move(diagnosed));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::StartP2p(c10d::OpType type,
                                                            const char* profiling_title,
                                                            const std::string& op,
                                                            std::vector<at::Tensor> tensors,
                                                            std::vector<P2pOp> ops) {
  auto work = c10::make_intrusive<ChorusWork>(rank_, type, profiling_title, op, tensors, tensors,
                                              kNoTimeout);
  p2p_->Start("", std::move(ops), [work](std::exception_ptr error) {
    if (error) {
      work->Fail(OperationFailure(work->op(), error));
    } else {
      work->Succeed();
    }
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  const std::string op = "allreduce";
  at::Tensor tensor = OnlyTensor(tensors, op, "input");
  CheckDense(tensor, op, "input");
  const chorus_dtype dtype = DtypeOf(tensor, op);
  const chorus_reduce_op reduce = ReduceOpOf(opts.reduceOp, op);
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::ALLREDUCE, "chorus:all_reduce", op, {tensor}, {tensor}, opts.timeout,
                 [comm, tensor, dtype, reduce] {
                   comm->AllReduce(tensor.data_ptr(), tensor.data_ptr(),
                                   static_cast<size_t>(tensor.numel()), dtype, reduce);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const std::string op = "allreduce_coalesced";
  // One all-reduce per dtype, over the tensors of that dtype packed together, in the order the
  // dtypes first appear (the same on every rank).
  std::vector<std::pair<chorus_dtype, std::vector<at::Tensor>>> groups;
  std::map<chorus_dtype, size_t> group_of;
  for (size_t i = 0; i < tensors.size(); ++i) {
    CheckDense(tensors[i], op, "input " + std::to_string(i));
    const chorus_dtype dtype = DtypeOf(tensors[i], op);
    const auto [at, added] = group_of.emplace(dtype, groups.size());
    if (added) groups.push_back({dtype, {}});
    groups[at->second].second.push_back(tensors[i]);
  }
  const chorus_reduce_op reduce = ReduceOpOf(opts.reduceOp, op);
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::ALLREDUCE_COALESCED, "chorus:all_reduce_coalesced", op, tensors,
                 tensors, opts.timeout, [comm, groups, reduce]() mutable {
                   for (auto& [dtype, members] : groups) {
                     at::Tensor flat = members.size() == 1 ? members[0] : Flatten(members);
                     comm->AllReduce(flat.data_ptr(), flat.data_ptr(),
                                     static_cast<size_t>(flat.numel()), dtype, reduce);
                     if (members.size() > 1) Unflatten(flat, members);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  const std::string op = "broadcast";
  at::Tensor tensor = OnlyTensor(tensors, op, "input");
  CheckDense(tensor, op, "input");
  const chorus_dtype dtype = DtypeOf(tensor, op);
  TORCH_CHECK(opts.rootTensor == 0, "chorus: broadcast: rootTensor ", opts.rootTensor,
              " is not 0 (one tensor per process)");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "chorus: broadcast: root rank ",
              opts.rootRank, " is not a rank of this group of ", size_);
  const int root = static_cast<int>(opts.rootRank);
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::BROADCAST, "chorus:broadcast", op, {tensor}, {tensor}, opts.timeout,
                 [comm, tensor, dtype, root] {
                   comm->Broadcast(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), dtype,
                                   root);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const std::string op = "allgather";
  at::Tensor input = OnlyTensor(inputs, op, "input");
  CheckDense(input, op, "input");
  const chorus_dtype dtype = DtypeOf(input, op);
  TORCH_CHECK(outputs.size() == 1, "chorus: allgather takes one output list per process (got ",
              outputs.size(), ")");
  std::vector<at::Tensor> out = outputs[0];
  TORCH_CHECK(static_cast<int>(out.size()) == size_, "chorus: allgather: the output list has ",
              out.size(), " tensors; expected one per rank (", size_, ")");
  for (size_t r = 0; r < out.size(); ++r) {
    CheckDense(out[r], op, "output " + std::to_string(r));
    CheckLike(out[r], input.scalar_type(), input.numel(), op, "output " + std::to_string(r));
  }
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::ALLGATHER, "chorus:all_gather", op, {input}, out, opts.timeout,
                 [comm, input, out, dtype]() mutable {
                   at::Tensor flat = at::empty({input.numel() * static_cast<int64_t>(out.size())},
                                               input.options());
                   comm->AllGather(input.data_ptr(), flat.data_ptr(),
                                   static_cast<size_t>(input.numel()), dtype);
                   Unflatten(flat, out);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const std::string op = "_allgather_base";
  CheckDense(input, op, "input");
  CheckDense(output, op, "output");
  const chorus_dtype dtype = DtypeOf(input, op);
  CheckLike(output, input.scalar_type(), input.numel() * size_, op, "output");
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::_ALLGATHER_BASE, "chorus:_all_gather_base", op, {input}, {output},
                 opts.timeout, [comm, input, output, dtype] {
                   comm->AllGather(input.data_ptr(), output.data_ptr(),
                                   static_cast<size_t>(input.numel()), dtype);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter";
  at::Tensor output = OnlyTensor(outputs, op, "output");
  CheckDense(output, op, "output");
  const chorus_dtype dtype = DtypeOf(output, op);
  TORCH_CHECK(inputs.size() == 1, "chorus: reduce_scatter takes one input list per process (got ",
              inputs.size(), ")");
  std::vector<at::Tensor> in = inputs[0];
  TORCH_CHECK(static_cast<int>(in.size()) == size_, "chorus: reduce_scatter: the input list has ",
              in.size(), " tensors; expected one per rank (", size_, ")");
  for (size_t r = 0; r < in.size(); ++r) {
    CheckDense(in[r], op, "input " + std::to_string(r));
    CheckLike(in[r], output.scalar_type(), output.numel(), op, "input " + std::to_string(r));
  }
  const chorus_reduce_op reduce = ReduceOpOf(opts.reduceOp, op);
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::REDUCE_SCATTER, "chorus:reduce_scatter", op, in, {output},
                 opts.timeout, [comm, in, output, dtype, reduce] {
                   const at::Tensor flat = Flatten(in);
                   comm->ReduceScatter(flat.data_ptr(), output.data_ptr(),
                                       static_cast<size_t>(output.numel()), dtype, reduce);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const std::string op = "_reduce_scatter_base";
  CheckDense(input, op, "input");
  CheckDense(output, op, "output");
  const chorus_dtype dtype = DtypeOf(output, op);
  CheckLike(input, output.scalar_type(), output.numel() * size_, op, "input");
  const chorus_reduce_op reduce = ReduceOpOf(opts.reduceOp, op);
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "chorus:_reduce_scatter_base", op, {input},
                 {output}, opts.timeout, [comm, input, output, dtype, reduce] {
                   comm->ReduceScatter(input.data_ptr(), output.data_ptr(),
                                       static_cast<size_t>(output.numel()), dtype, reduce);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::barrier(const c10d::BarrierOptions& opts) {
  Communicator* comm = communicator_.get();
  // Runs after every operation queued before it, as gloo's barrier does.
  return Enqueue(c10d::OpType::BARRIER, "chorus:barrier", "barrier", {}, {}, opts.timeout,
                 [comm] { comm->Barrier(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  const std::string op = "reduce";
  at::Tensor tensor = OnlyTensor(tensors, op, "input");
  CheckDense(tensor, op, "input");
  const chorus_dtype dtype = DtypeOf(tensor, op);
  const chorus_reduce_op reduce = ReduceOpOf(opts.reduceOp, op);
  CheckRank(opts.rootRank, size_, op, "root rank");
  TORCH_CHECK(opts.rootTensor == 0, "chorus: reduce: rootTensor ", opts.rootTensor,
              " is not 0 (one tensor per process)");
  const bool root = opts.rootRank == rank_;
  Communicator* comm = communicator_.get();
  // An all-reduce whose result only the root keeps: the other ranks' tensors stay as they were
  // (chorus has no rooted reduce; it moves as many bytes as an all-reduce does).
  return Enqueue(c10d::OpType::REDUCE, "chorus:reduce", op, {tensor}, {tensor}, opts.timeout,
                 [comm, tensor, dtype, reduce, root] {
                   at::Tensor result = root ? tensor : at::empty_like(tensor);
                   comm->AllReduce(tensor.data_ptr(), result.data_ptr(),
                                   static_cast<size_t>(tensor.numel()), dtype, reduce);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const std::string op = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), "chorus: ", op, ": no input tensors");
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "chorus: ", op, ": ", outputs.size(),
              " output lists; expected one per rank (", size_, ")");
  const chorus_dtype dtype = DtypeOf(inputs[0], op);
  int64_t count = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckDense(inputs[i], op, "input " + std::to_string(i));
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type(), "chorus: ", op,
                ": the inputs mix ", inputs[0].scalar_type(), " and ", inputs[i].scalar_type(),
                "; chorus gathers one dtype per call");
    count += inputs[i].numel();
  }
  std::vector<at::Tensor> flat_outputs;
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK(outputs[r].size() == inputs.size(), "chorus: ", op, ": output list ", r, " has ",
                outputs[r].size(), " tensors; expected ", inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string what = "output " + std::to_string(r) + "." + std::to_string(i);
      CheckDense(outputs[r][i], op, what);
      CheckLike(outputs[r][i], inputs[i].scalar_type(), inputs[i].numel(), op, what);
      flat_outputs.push_back(outputs[r][i]);
    }
  }
  Communicator* comm = communicator_.get();
  return Enqueue(c10d::OpType::ALLGATHER_COALESCED, "chorus:all_gather_coalesced", op, inputs,
                 flat_outputs, opts.timeout,
                 [comm, inputs, flat_outputs, dtype, count, size = size_]() mutable {
                   const at::Tensor flat_input = Flatten(inputs);
                   at::Tensor gathered = at::empty({count * size}, flat_input.options());
                   comm->AllGather(flat_input.data_ptr(), gathered.data_ptr(),
                                   static_cast<size_t>(count), dtype);
                   Unflatten(gathered, flat_outputs);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const std::string op = "gather";
  at::Tensor input = OnlyTensor(inputs, op, "input");
  CheckDense(input, op, "input");
  CheckRank(opts.rootRank, size_, op, "root rank");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> gathered;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1, "chorus: gather: the root takes one output list (got ",
                outputs.size(), ")");
    gathered = outputs[0];
    TORCH_CHECK(static_cast<int>(gathered.size()) == size_, "chorus: gather: the output list has ",
                gathered.size(), " tensors; expected one per rank (", size_, ")");
    for (int r = 0; r < size_; ++r) {
      CheckDense(gathered[r], op, "output " + std::to_string(r));
      CheckLike(gathered[r], input.scalar_type(), input.numel(), op, "output " + std::to_string(r));
    }
  } else {
    TORCH_CHECK(outputs.empty(), "chorus: gather: only the root (rank ", root,
                ") takes an output list");
  }
  const uint64_t tag = NextCollectiveTag();
  P2pEngine* p2p = p2p_.get();
  const int rank = rank_;
  // On the worker thread, in order with the collectives; the receives land in the outputs.
  return Enqueue(c10d::OpType::GATHER, "chorus:gather", op, {input}, gathered, opts.timeout,
                 [p2p, input, gathered, root, rank, tag] {
                   std::vector<P2pOp> ops;
                   if (rank != root) {
                     ops.push_back(Transfer(true, root, tag, input));
                   } else {
                     for (int r = 0; r < static_cast<int>(gathered.size()); ++r) {
                       if (r == rank) {
                         gathered[r].copy_(input);
                       } else {
                         ops.push_back(Transfer(false, r, tag, gathered[r]));
                       }
                     }
                   }
                   p2p->Run("gather to rank " + std::to_string(root), std::move(ops));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const std::string op = "scatter";
  at::Tensor output = OnlyTensor(outputs, op, "output");
  CheckDense(output, op, "output");
  CheckRank(opts.rootRank, size_, op, "root rank");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> parts;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, "chorus: scatter: the root takes one input list (got ",
                inputs.size(), ")");
    parts = inputs[0];
    TORCH_CHECK(static_cast<int>(parts.size()) == size_, "chorus: scatter: the input list has ",
                parts.size(), " tensors; expected one per rank (", size_, ")");
    for (int r = 0; r < size_; ++r) {
      CheckDense(parts[r], op, "input " + std::to_string(r));
      CheckLike(parts[r], output.scalar_type(), output.numel(), op, "input " + std::to_string(r));
    }
  } else {
    TORCH_CHECK(inputs.empty(), "chorus: scatter: only the root (rank ", root,
                ") takes an input list");
  }
  const uint64_t tag = NextCollectiveTag();
  P2pEngine* p2p = p2p_.get();
  const int rank = rank_;
  return Enqueue(c10d::OpType::SCATTER, "chorus:scatter", op, parts, {output}, opts.timeout,
                 [p2p, output, parts, root, rank, tag] {
                   std::vector<P2pOp> ops;
                   if (rank != root) {
                     ops.push_back(Transfer(false, root, tag, output));
                   } else {
                     for (int r = 0; r < static_cast<int>(parts.size()); ++r) {
                       if (r == rank) {
                         output.copy_(parts[r]);
                       } else {
                         ops.push_back(Transfer(true, r, tag, parts[r]));
                       }
                     }
                   }
                   p2p->Run("scatter from rank " + std::to_string(root), std::move(ops));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  const std::string op = "alltoall_base";
  CheckDense(input, op, "input");
  CheckDense(output, op, "output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "chorus: ", op, ": the output is ",
              output.scalar_type(), " but the input is ", input.scalar_type());
  // Rows of dim 0 per rank: the split sizes given, else equal parts.
  const auto rows_per_rank = [&](const at::Tensor& t, const std::vector<int64_t>& splits,
                                 const char* what) {
    std::vector<int64_t> rows;
    const int64_t total = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) {
      TORCH_CHECK(total % size_ == 0, "chorus: ", op, ": the ", what, "'s ", total,
                  " rows do not split into ", size_, " equal parts; pass split sizes");
      rows.assign(size_, total / size_);
    } else {
      TORCH_CHECK(static_cast<int>(splits.size()) == size_, "chorus: ", op, ": ", splits.size(),
                  " ", what, " split sizes; expected one per rank (", size_, ")");
      int64_t sum = 0;
      for (int64_t s : splits) {
        TORCH_CHECK(s >= 0, "chorus: ", op, ": a negative ", what, " split size (", s, ")");
        sum += s;
      }
      TORCH_CHECK(sum == total, "chorus: ", op, ": the ", what, " split sizes add up to ", sum,
                  " rows but the ", what, " has ", total);
      rows = splits;
    }
    return rows;
  };
  const std::vector<int64_t> send_rows = rows_per_rank(input, input_split_sizes, "input");
  const std::vector<int64_t> recv_rows = rows_per_rank(output, output_split_sizes, "output");
  // Elements per row of dim 0 (a 0-dim tensor is one row of one).
  const auto row_size = [](const at::Tensor& t) {
    if (t.dim() == 0) return int64_t{1};
    int64_t elements = 1;
    for (int64_t d = 1; d < t.dim(); ++d) elements *= t.size(d);
    return elements;
  };
  const int64_t input_row = row_size(input);
  const int64_t output_row = row_size(output);
  TORCH_CHECK(send_rows[rank_] * input_row == recv_rows[rank_] * output_row, "chorus: ", op,
              ": rank ", rank_, " sends itself ", send_rows[rank_] * input_row,
              " elements but expects ", recv_rows[rank_] * output_row);
  const uint64_t tag = NextCollectiveTag();
  P2pEngine* p2p = p2p_.get();
  const int rank = rank_;
  return Enqueue(c10d::OpType::ALLTOALL_BASE, "chorus:all_to_all", op, {input}, {output},
                 opts.timeout,
                 [p2p, input, output, send_rows, recv_rows, input_row, output_row, rank, tag] {
                   const at::Tensor in = input.reshape({-1});
                   const at::Tensor out = output.view({-1});
                   std::vector<at::Tensor> sends, recvs;
                   int64_t in_at = 0, out_at = 0;
                   for (size_t r = 0; r < send_rows.size(); ++r) {
                     sends.push_back(in.narrow(0, in_at, send_rows[r] * input_row));
                     recvs.push_back(out.narrow(0, out_at, recv_rows[r] * output_row));
                     in_at += send_rows[r] * input_row;
                     out_at += recv_rows[r] * output_row;
                   }
                   std::vector<P2pOp> ops;
                   for (int r = 0; r < static_cast<int>(sends.size()); ++r) {
                     if (r == rank) {
                       recvs[r].copy_(sends[r]);
                       continue;
                     }
                     ops.push_back(Transfer(false, r, tag, recvs[r]));
                     ops.push_back(Transfer(true, r, tag, sends[r]));
                   }
                   p2p->Run("all-to-all", std::move(ops));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  const std::string op = "alltoall";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "chorus: alltoall: ", inputs.size(), " inputs and ", outputs.size(),
              " outputs; expected one of each per rank (", size_, ")");
  for (int r = 0; r < size_; ++r) {
    CheckDense(inputs[r], op, "input " + std::to_string(r));
    CheckDense(outputs[r], op, "output " + std::to_string(r));
    TORCH_CHECK(outputs[r].scalar_type() == inputs[r].scalar_type(), "chorus: alltoall: output ", r,
                " is ", outputs[r].scalar_type(), " but input ", r, " is ",
                inputs[r].scalar_type());
  }
  CheckLike(outputs[rank_], inputs[rank_].scalar_type(), inputs[rank_].numel(), op,
            "output " + std::to_string(rank_));
  const uint64_t tag = NextCollectiveTag();
  P2pEngine* p2p = p2p_.get();
  const int rank = rank_;
  return Enqueue(c10d::OpType::ALLTOALL, "chorus:all_to_all", op, inputs, outputs, opts.timeout,
                 [p2p, inputs, outputs, rank, tag] {
                   std::vector<P2pOp> ops;
                   for (int r = 0; r < static_cast<int>(inputs.size()); ++r) {
                     if (r == rank) {
                       outputs[r].copy_(inputs[r]);
                       continue;
                     }
                     ops.push_back(Transfer(false, r, tag, outputs[r]));
                     ops.push_back(Transfer(true, r, tag, inputs[r]));
                   }
                   p2p->Run("all-to-all", std::move(ops));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::send(std::vector<at::Tensor>& tensors,
                                                        int dst_rank, int tag) {
  const std::string op = "send";
  at::Tensor tensor = OnlyTensor(tensors, op, "input");
  CheckDense(tensor, op, "input");
  CheckRank(dst_rank, size_, op, "destination");
  TORCH_CHECK(dst_rank != rank_, "chorus: send: rank ", rank_, " sends to itself");
  return StartP2p(c10d::OpType::SEND, "chorus:send", op, {tensor},
                  {Transfer(true, dst_rank, static_cast<uint32_t>(tag), tensor)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recv(std::vector<at::Tensor>& tensors,
                                                        int src_rank, int tag) {
  const std::string op = "recv";
  at::Tensor tensor = OnlyTensor(tensors, op, "output");
  CheckDense(tensor, op, "output");
  CheckRank(src_rank, size_, op, "source");
  TORCH_CHECK(src_rank != rank_, "chorus: recv: rank ", rank_, " receives from itself");
  return StartP2p(c10d::OpType::RECV, "chorus:recv", op, {tensor},
                  {Transfer(false, src_rank, static_cast<uint32_t>(tag), tensor)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false,
              "chorus: recv without a source rank is not supported: chorus transports receive "
              "from a named rank; pass src=");
}

void ProcessGroupChorus::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  // Rank 0 waits for a message of every other rank, then answers each: the ranks that did not
  // arrive within the time-out are named (all of them: wait_all_ranks or not, the receives are
  // posted together). Synchronous, on the caller's thread, as gloo's is.
  (void)wait_all_ranks;
  const uint64_t tag = NextCollectiveTag();
  uint8_t token = 0;
  std::vector<uint8_t> tokens(size_);
  std::vector<P2pOp> arrive, answer;
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) {
      arrive.push_back(P2pOp{false, r, tag, &tokens[r], 1});
      answer.push_back(P2pOp{true, r, tag, &tokens[r], 1});
    }
  } else {
    arrive.push_back(P2pOp{true, 0, tag, &token, 1});
    answer.push_back(P2pOp{false, 0, tag, &token, 1});
  }
  const std::chrono::milliseconds timeout =
      opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  try {
    p2p_->Run("monitored_barrier", std::move(arrive), timeout);
    p2p_->Run("monitored_barrier", std::move(answer), timeout);
  } catch (...) {
    std::rethrow_exception(OperationFailure("monitored_barrier", std::current_exception()));
  }
}

}  // namespace chorus::torch_backend
