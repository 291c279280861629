// chorus SDK: composing other collectives through the host (plugin.h 1.1,
// chorus_host_collectives). A plugin never links another plugin; it asks the core, which finds
// the collective by name (or picks one by the scores for the sub-job's shape) and creates it over
// a prefix of the plugin's own store. Header-only, C++17; needs sdk::SetHost at init.
//
//   sdk::HostCommunicator local({.collective = "",  // AUTO: the best for one host
//                                .rank = local_rank, .size = local_size, .store = args.store,
//                                .store_prefix = "local/0/", .timeout_ms = args.timeout_ms,
//                                .hosts = 1, .ranks_per_host = local_size});
//   local.AllReduce(send, recv, count, dtype, CHORUS_REDUCE_SUM);  // throws chorus::Error
#ifndef CHORUS_COMPOSITION_HPP_
#define CHORUS_COMPOSITION_HPP_

#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <string>
#include <utility>
#include <vector>

#if CHORUS_ABI_MINOR >= 1

namespace chorus::sdk {

// The host's composition services; throws UNSUPPORTED when the core (older than 1.1) has none.
inline const chorus_host_collectives& HostCollectives() {
  const chorus_host* host = Host();
  if (host == nullptr || !CHORUS_HAS_FIELD(host, chorus_host, collectives) ||
      host->collectives == nullptr ||
      host->collectives->struct_size < CHORUS_STRUCT_SIZE(chorus_host_collectives, last_error)) {
    Fail(CHORUS_UNSUPPORTED,
         "this core offers no host collectives (composition needs a chorus core of ABI 1.1 or "
         "newer)");
  }
  return *host->collectives;
}

// The highest score another plugin's collective declares for `args`, and its name (static).
inline uint32_t BestHostScore(const chorus_score_args& args, const char** name = nullptr) {
  const chorus_host_collectives& services = HostCollectives();
  uint32_t score = 0;
  const char* best = "";
  const chorus_status status = services.best_score(Host()->ctx, &args, &score, &best);
  if (status != CHORUS_OK) Fail(status, services.last_error(Host()->ctx));
  if (name != nullptr) *name = best;
  return score;
}

// One communicator of another collective, created by the host; destroyed with this object.
// Operations complete before they return and throw chorus::Error with the host's message.
class HostCommunicator {
 public:
  struct Config {
    std::string collective;  // a collective's name, "local+cross", or "" / "AUTO"
    int rank = 0;
    int size = 1;
    const chorus_kv_store* store = nullptr;  // must outlive this object
    std::string store_prefix;
    int64_t timeout_ms = 300000;
    std::vector<std::pair<std::string, std::string>> options;
    int hosts = 1;           // the sub-job's shape, for AUTO
    int ranks_per_host = 0;  // 0: hosts run different numbers
    std::string address;
    std::string host_id;
  };

  explicit HostCommunicator(const Config& config) : services_(HostCollectives()) {
    std::vector<chorus_option> options;
    for (const auto& [key, value] : config.options) options.push_back({key.c_str(), value.c_str()});
    chorus_host_communicator_create_args args{};
    args.struct_size = sizeof(args);
    args.collective = config.collective.empty() ? nullptr : config.collective.c_str();
    args.rank = config.rank;
    args.size = config.size;
    args.store = config.store;
    args.store_prefix = config.store_prefix.c_str();
    args.timeout_ms = config.timeout_ms;
    args.options = options.data();
    args.num_options = options.size();
    args.hosts = config.hosts;
    args.ranks_per_host = config.ranks_per_host;
    args.address = config.address.empty() ? nullptr : config.address.c_str();
    args.host_id = config.host_id.empty() ? nullptr : config.host_id.c_str();
    Check(services_.create(Host()->ctx, &args, &comm_));
  }
  ~HostCommunicator() {
    if (comm_ != nullptr) services_.destroy(Host()->ctx, comm_);
  }
  HostCommunicator(const HostCommunicator&) = delete;
  HostCommunicator& operator=(const HostCommunicator&) = delete;

  // The collective's name (for AUTO: the one the core chose).
  std::string name() const { return services_.name(Host()->ctx, comm_); }

  void AllReduce(const void* send, void* recv, size_t count, chorus_dtype dtype,
                 chorus_reduce_op op) {
    chorus_all_reduce_args args{};
    args.struct_size = sizeof(args);
    args.send = send;
    args.recv = recv;
    args.count = count;
    args.dtype = dtype;
    args.op = op;
    Check(services_.all_reduce(Host()->ctx, comm_, &args));
  }
  void Broadcast(void* data, size_t count, chorus_dtype dtype, int root) {
    chorus_collective_broadcast_args args{};
    args.struct_size = sizeof(args);
    args.data = data;
    args.count = count;
    args.dtype = dtype;
    args.root = root;
    Check(services_.broadcast(Host()->ctx, comm_, &args));
  }
  // recv holds size * count elements, rank r's block at r * count.
  void AllGather(const void* send, void* recv, size_t count, chorus_dtype dtype) {
    chorus_collective_all_gather_args args{};
    args.struct_size = sizeof(args);
    args.send = send;
    args.recv = recv;
    args.count = count;
    args.dtype = dtype;
    Check(services_.all_gather(Host()->ctx, comm_, &args));
  }
  // send holds size * recv_count elements; rank r gets the reduction of block r.
  void ReduceScatter(const void* send, void* recv, size_t recv_count, chorus_dtype dtype,
                     chorus_reduce_op op) {
    chorus_reduce_scatter_args args{};
    args.struct_size = sizeof(args);
    args.send = send;
    args.recv = recv;
    args.recv_count = recv_count;
    args.dtype = dtype;
    args.op = op;
    Check(services_.reduce_scatter(Host()->ctx, comm_, &args));
  }
  void Barrier() { Check(services_.barrier(Host()->ctx, comm_)); }
  // From any thread, while another is inside an operation.
  void Abort() { services_.abort(Host()->ctx, comm_); }

 private:
  void Check(chorus_status status) const {
    if (status != CHORUS_OK) Fail(status, services_.last_error(Host()->ctx));
  }

  const chorus_host_collectives& services_;
  chorus_host_communicator* comm_ = nullptr;
};

}  // namespace chorus::sdk

#endif  // CHORUS_ABI_MINOR >= 1

#endif  // CHORUS_COMPOSITION_HPP_
