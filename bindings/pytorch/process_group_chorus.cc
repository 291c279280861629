#include "process_group_chorus.h"

#include <arpa/inet.h>
#include <c10/util/Exception.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/collective/selection.h>
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

[[noreturn]] void NotSupported(const char* op) {
  TORCH_CHECK(false, "chorus: ", op, " is not supported yet");
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

}  // namespace

ProcessGroupChorus::ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, milliseconds timeout)
    : c10d::ProcessGroup(rank, size) {
  auto kv = std::make_shared<C10dKvStore>(store);
  // torch hands each group a store of its own (a PrefixStore); the count keeps the keys of a
  // second group made over the same store apart all the same.
  const int64_t use = kv->Add("chorus/groups/" + std::to_string(rank), 1);
  const std::string scope = "chorus/" + std::to_string(use) + "/";

  // The job's shape from every rank's host id (CHORUS_HOST_ID, or hostname/boot-id): shared
  // memory within a host, composition across hosts, the tuning file's [workers hosts] section.
  const std::string host_id = HostIdentity();
  kv->Set(scope + "host/" + std::to_string(rank), ToBytes(host_id));
  std::vector<std::string> host_ids;
  for (int r = 0; r < size; ++r) {
    try {
      host_ids.push_back(ToString(kv->Get(scope + "host/" + std::to_string(r), timeout)));
    } catch (const Error& e) {
      if (e.status() != CHORUS_TIMEOUT) throw;
      std::ostringstream seconds;
      seconds << static_cast<double>(timeout.count()) / 1000.0;
      throw Error(CHORUS_TIMEOUT, RankName(r) + " did not create its chorus process group within " +
                                      seconds.str() + " s (" + e.what() + ")");
    }
  }
  const JobShape shape = JobShape::FromHostIds(host_ids, "host");
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
  for (int r = 0; r < size; ++r) config.task_names.push_back(RankName(r));
  communicator_ = Communicator::Create(Registry::Global(), plan, config);
  queue_ = std::make_unique<WorkQueue>();
  init();
}

ProcessGroupChorus::~ProcessGroupChorus() { queue_.reset(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::Enqueue(
    c10d::OpType type, const char* profiling_title, const std::string& op,
    std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs, milliseconds timeout,
    std::function<void()> body) {
  auto work = c10::make_intrusive<ChorusWork>(
      rank_, type, profiling_title, op, std::move(inputs), std::move(outputs),
      timeout == c10d::kUnsetTimeout ? kNoTimeout : timeout);
  queue_->Push(work, std::move(body));
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

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>&,
                                                          const c10d::ReduceOptions&) {
  NotSupported("reduce");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
    const c10d::AllgatherOptions&) {
  NotSupported("allgather_coalesced");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::gather(std::vector<std::vector<at::Tensor>>&,
                                                          std::vector<at::Tensor>&,
                                                          const c10d::GatherOptions&) {
  NotSupported("gather");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::scatter(std::vector<at::Tensor>&,
                                                           std::vector<std::vector<at::Tensor>>&,
                                                           const c10d::ScatterOptions&) {
  NotSupported("scatter");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall_base(at::Tensor&, at::Tensor&,
                                                                 std::vector<int64_t>&,
                                                                 std::vector<int64_t>&,
                                                                 const c10d::AllToAllOptions&) {
  NotSupported("alltoall_base");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall(std::vector<at::Tensor>&,
                                                            std::vector<at::Tensor>&,
                                                            const c10d::AllToAllOptions&) {
  NotSupported("alltoall");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::send(std::vector<at::Tensor>&, int, int) {
  NotSupported("send");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recv(std::vector<at::Tensor>&, int, int) {
  NotSupported("recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recvAnysource(std::vector<at::Tensor>&, int) {
  NotSupported("recvAnysource");
}

void ProcessGroupChorus::monitoredBarrier(const c10d::BarrierOptions&, bool) {
  NotSupported("monitored_barrier");
}

}  // namespace chorus::torch_backend
