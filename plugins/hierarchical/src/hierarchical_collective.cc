#include "hierarchical_collective.h"

#include <algorithm>
#include <chorus/composition.hpp>
#include <chorus/names.hpp>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::hierarchical {
namespace {

using sdk::Fail;
using sdk::HostCommunicator;

// Where every rank sits: hosts are numbered by their lowest rank, local ranks by rank.
struct Layout {
  int rank = 0, size = 1;
  int host = 0, hosts = 1;
  int local_rank = 0, local_size = 1;
  std::vector<int> rank_at;  // rank_at[h * local_size + l]: the rank of local rank l on host h
  std::vector<int> host_of, local_rank_of;  // by rank
  bool host_major = true;                   // rank == h * local_size + l for every rank
};

Layout ExchangeLayout(const sdk::StoreView& store, int rank, int size, const std::string& my_host,
                      int64_t timeout_ms, const std::string& what) {
  store.Set("host/" + std::to_string(rank), my_host);
  std::vector<std::string> ids(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ids[r] = store.Get("host/" + std::to_string(r), timeout_ms);
  std::map<std::string, std::vector<int>> members;
  std::vector<std::string> order;  // host ids by lowest rank
  for (int r = 0; r < size; ++r) {
    if (members[ids[r]].empty()) order.push_back(ids[r]);
    members[ids[r]].push_back(r);
  }
  Layout layout;
  layout.rank = rank;
  layout.size = size;
  layout.hosts = static_cast<int>(order.size());
  layout.local_size = static_cast<int>(members[order[0]].size());
  for (const std::string& id : order) {
    if (members[id].size() == members[order[0]].size()) continue;
    auto describe = [&](const std::string& host) {
      std::string ranks;
      for (int r : members[host]) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      return "host '" + host + "' runs " + std::to_string(members[host].size()) + " (rank" +
             (members[host].size() == 1 ? " " : "s ") + ranks + ")";
    };
    Fail(CHORUS_INVALID_ARGUMENT, what, ": every host must run as many ranks, but ",
         describe(order[0]), " and ", describe(id),
         "; start as many workers on every host, or use one collective for all ranks "
         "(CHORUS_COMMUNICATION=gloo, say)");
  }
  layout.rank_at.resize(static_cast<size_t>(size));
  layout.host_of.resize(static_cast<size_t>(size));
  layout.local_rank_of.resize(static_cast<size_t>(size));
  for (int h = 0; h < layout.hosts; ++h) {
    const auto& ranks = members[order[h]];
    for (int l = 0; l < layout.local_size; ++l) {
      const int r = ranks[l];
      layout.rank_at[h * layout.local_size + l] = r;
      layout.host_of[r] = h;
      layout.local_rank_of[r] = l;
      layout.host_major = layout.host_major && r == h * layout.local_size + l;
    }
  }
  layout.host = layout.host_of[rank];
  layout.local_rank = layout.local_rank_of[rank];
  return layout;
}

struct Hierarchical {
  std::string name;  // "shm+gloo"
  Layout layout;
  std::unique_ptr<HostCommunicator> local;  // none when every host runs one rank
  std::unique_ptr<HostCommunicator> cross;  // none when there is one host
  std::mutex mutex;                         // one operation at a time; guards scratch
  std::vector<unsigned char> scratch, scratch2;

  // How the ranks of one level's communicator map to the job's: its messages count its own.
  std::string RankMap(bool across) const {
    const Layout& l = layout;
    const int n = across ? l.hosts : l.local_size;
    std::string mine, job;
    for (int i = 0; i < n; ++i) {
      const int r = across ? l.rank_at[static_cast<size_t>(i * l.local_size + l.local_rank)]
                           : l.rank_at[static_cast<size_t>(l.host * l.local_size + i)];
      mine += (i == 0 ? "" : ", ") + std::to_string(i);
      job += (i == 0 ? "" : ", ") + std::to_string(r);
    }
    return " (where ranks " + mine + " are the job's ranks " + job + ")";
  }
  std::string Describe(const char* op) const {
    return std::string("hierarchical ") + name + " " + op + " (rank " +
           std::to_string(layout.rank) + " of " + std::to_string(layout.size) + ", host " +
           std::to_string(layout.host) + " of " + std::to_string(layout.hosts) + ")";
  }
  unsigned char* Scratch(std::vector<unsigned char>& buffer, size_t bytes) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
  }
};

Hierarchical& Require(chorus_communicator* comm, const char* what) {
  if (comm == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "hierarchical ", what, ": comm is NULL");
  return *reinterpret_cast<Hierarchical*>(comm);
}

// Runs one step of an operation; a failure names the step and keeps the inner status. Every step
// ends "within the host" or "across hosts": the level whose ranks the inner message counts.
template <typename Body>
void Step(const Hierarchical& h, const char* op, const char* step, Body&& body) {
  try {
    body();
  } catch (const sdk::Error& e) {
    const bool across = std::string_view(step).ends_with("across hosts");
    Fail(e.status(), h.Describe(op), ", ", step, h.RankMap(across), ": ", e.what());
  }
}

chorus_status Create(const chorus_communicator_create_args* args, chorus_communicator** out) {
  return sdk::Guard([&] {
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_communicator_create_args, num_options),
                         "hierarchical create");
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "hierarchical create: out is NULL");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "hierarchical create: rank ", a.rank, " of size ", a.size,
           " is not a rank (0 <= rank < size)");
    }
    if (a.store == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "hierarchical create: store is NULL");
    if (a.timeout_ms <= 0) Fail(CHORUS_INVALID_ARGUMENT, "hierarchical create: timeout_ms <= 0");
    if (CHORUS_HAS_FIELD(&a, chorus_communicator_create_args, devices_api) &&
        a.devices_api != nullptr) {
      Fail(CHORUS_UNSUPPORTED, "hierarchical: buffers on '", a.devices_api->platform,
           "' devices are not supported; it composes host-memory collectives");
    }
    if (a.num_options > 0 && a.options == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "hierarchical create: options is NULL");
    }
    std::string local_name, cross_name, host(sdk::CreateHostId(a));
    std::vector<std::pair<std::string, std::string>> local_options, cross_options;
    for (size_t i = 0; i < a.num_options; ++i) {
      const std::string key = a.options[i].key ? a.options[i].key : "";
      const std::string value = a.options[i].value ? a.options[i].value : "";
      if (key == "local") {
        local_name = value;
      } else if (key == "cross") {
        cross_name = value;
      } else if (key == "host") {
        host = value;
      } else if (key.starts_with("local.")) {
        local_options.emplace_back(key.substr(6), value);
      } else if (key.starts_with("cross.")) {
        cross_options.emplace_back(key.substr(6), value);
      } else {
        Fail(CHORUS_INVALID_ARGUMENT, "hierarchical: unknown option '", key,
             "'; the options are local, cross, host, local.<key> and cross.<key>");
      }
    }
    if (local_name == kHierarchicalName || cross_name == kHierarchicalName ||
        local_name.find('+') != std::string::npos || cross_name.find('+') != std::string::npos) {
      Fail(CHORUS_INVALID_ARGUMENT, "hierarchical: local and cross must be flat collectives");
    }
    auto h = std::make_unique<Hierarchical>();
    // Empty names: AUTO, the core's choice for each level's shape.
    h->name = (local_name.empty() ? "auto" : local_name) + "+" +
              (cross_name.empty() ? "auto" : cross_name);
    const sdk::StoreView store(a.store);
    const std::string what = "hierarchical " + h->name + " create (rank " + std::to_string(a.rank) +
                             " of " + std::to_string(a.size) + ")";
    try {
      h->layout = ExchangeLayout(store, a.rank, a.size, host, a.timeout_ms, what);
      const Layout& l = h->layout;
      const std::string address(sdk::CreateAddress(a));
      auto inner = [&](const std::string& collective, int rank, int size, std::string prefix,
                       const std::vector<std::pair<std::string, std::string>>& options, int hosts,
                       int ranks_per_host) {
        HostCommunicator::Config config;
        config.collective = collective;
        config.rank = rank;
        config.size = size;
        config.store = a.store;
        config.store_prefix = std::move(prefix);
        config.timeout_ms = a.timeout_ms;
        config.options = options;
        config.hosts = hosts;
        config.ranks_per_host = ranks_per_host;
        config.address = address;
        config.host_id = host;
        return std::make_unique<HostCommunicator>(config);
      };
      if (l.local_size > 1) {
        h->local = inner(local_name, l.local_rank, l.local_size,
                         "local/" + std::to_string(l.host) + "/", local_options, 1, l.local_size);
      }
      if (l.hosts > 1) {
        h->cross = inner(cross_name, l.host, l.hosts, "cross/" + std::to_string(l.local_rank) + "/",
                         cross_options, l.hosts, 1);
      }
      h->name = (h->local             ? h->local->name()
                 : local_name.empty() ? "auto"
                                      : local_name) +
                "+" +
                (h->cross             ? h->cross->name()
                 : cross_name.empty() ? "auto"
                                      : cross_name);
    } catch (const sdk::Error& e) {  // from an inner communicator
      Fail(e.status(), what, ": ", e.what());
    }
    if (sdk::LogEnabled(CHORUS_LOG_DEBUG)) {
      sdk::Log(CHORUS_LOG_DEBUG, what + ": " + h->name + ", host " +
                                     std::to_string(h->layout.host) + " of " +
                                     std::to_string(h->layout.hosts) + ", local rank " +
                                     std::to_string(h->layout.local_rank) + " of " +
                                     std::to_string(h->layout.local_size));
    }
    *out = reinterpret_cast<chorus_communicator*>(h.release());
  });
}

void Destroy(chorus_communicator* comm) { delete reinterpret_cast<Hierarchical*>(comm); }

void RequireData(const void* p, size_t count, const char* what, const char* name) {
  if (count > 0 && p == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": ", name, " is NULL");
}

// With one level only (one host, or one rank per host) runs `call` on that level's communicator,
// whose ranks are numbered as this one's; with none (a single rank) copies send to recv. Returns
// false when both levels exist.
template <typename Call>
bool RunOnOneLevel(Hierarchical& h, const char* op, const void* send, void* recv, size_t bytes,
                   Call&& call) {
  if (h.local && h.cross) return false;
  if (!h.local && !h.cross) {
    if (recv != send) std::memcpy(recv, send, bytes);
    return true;
  }
  HostCommunicator& only = h.local ? *h.local : *h.cross;
  Step(h, op, h.local ? "within the host" : "across hosts", [&] { call(only); });
  return true;
}

chorus_status AllReduce(chorus_communicator* comm, const chorus_all_reduce_args* args,
                        chorus_request** request) {
  return sdk::Guard([&] {
    constexpr const char* kOp = sdk::CollectiveOpName(CHORUS_OP_ALL_REDUCE);
    Hierarchical& h = Require(comm, kOp);
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_reduce_args, op),
                                     "hierarchical all_reduce");
    sdk::RequireDtype(a.dtype, "hierarchical all_reduce");
    sdk::RequireReduceOp(a.op, "hierarchical all_reduce");
    RequireData(a.send, a.count, "hierarchical all_reduce", "send");
    RequireData(a.recv, a.count, "hierarchical all_reduce", "recv");
    if (request != nullptr) *request = nullptr;
    std::lock_guard<std::mutex> lock(h.mutex);
    const size_t n = a.count, e = chorus_dtype_size(a.dtype);
    const auto* send = static_cast<const unsigned char*>(a.send);
    auto* recv = static_cast<unsigned char*>(a.recv);
    if (n == 0) return;
    if (RunOnOneLevel(h, kOp, send, recv, n * e,
                      [&](HostCommunicator& c) { c.AllReduce(send, recv, n, a.dtype, a.op); })) {
      return;
    }
    const size_t local_size = static_cast<size_t>(h.layout.local_size);
    const size_t shard = n / local_size;
    if (shard == 0 || n * e < kSplitBytes) {
      Step(h, kOp, "all_reduce within the host",
           [&] { h.local->AllReduce(send, recv, n, a.dtype, a.op); });
      Step(h, kOp, "all_reduce across hosts",
           [&] { h.cross->AllReduce(recv, recv, n, a.dtype, a.op); });
      return;
    }
    unsigned char* piece = h.Scratch(h.scratch, shard * e);
    Step(h, kOp, "reduce_scatter within the host",
         [&] { h.local->ReduceScatter(send, piece, shard, a.dtype, a.op); });
    Step(h, kOp, "all_reduce of this rank's shard across hosts",
         [&] { h.cross->AllReduce(piece, piece, shard, a.dtype, a.op); });
    Step(h, kOp, "all_gather within the host",
         [&] { h.local->AllGather(piece, recv, shard, a.dtype); });
    // The last n mod local_size elements: whole, within and then across.
    const size_t done = shard * local_size, rest = n - done;
    if (rest > 0) {
      Step(h, kOp, "all_reduce of the remainder within the host",
           [&] { h.local->AllReduce(send + done * e, recv + done * e, rest, a.dtype, a.op); });
      Step(h, kOp, "all_reduce of the remainder across hosts",
           [&] { h.cross->AllReduce(recv + done * e, recv + done * e, rest, a.dtype, a.op); });
    }
  });
}

chorus_status Broadcast(chorus_communicator* comm, const chorus_collective_broadcast_args* args,
                        chorus_request** request) {
  return sdk::Guard([&] {
    constexpr const char* kOp = sdk::CollectiveOpName(CHORUS_OP_BROADCAST);
    Hierarchical& h = Require(comm, kOp);
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_collective_broadcast_args, root), "hierarchical broadcast");
    sdk::RequireDtype(a.dtype, "hierarchical broadcast");
    RequireData(a.data, a.count, "hierarchical broadcast", "data");
    if (a.root < 0 || a.root >= h.layout.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "hierarchical broadcast: root ", a.root, " is not a rank of ",
           h.layout.size);
    }
    if (request != nullptr) *request = nullptr;
    std::lock_guard<std::mutex> lock(h.mutex);
    if (a.count == 0) return;
    const int root_host = h.layout.host_of[a.root];
    const int root_local = h.layout.local_rank_of[a.root];
    if (h.cross && h.layout.local_rank == root_local) {
      Step(h, kOp, "broadcast across hosts",
           [&] { h.cross->Broadcast(a.data, a.count, a.dtype, root_host); });
    }
    if (h.local) {
      Step(h, kOp, "broadcast within the host",
           [&] { h.local->Broadcast(a.data, a.count, a.dtype, root_local); });
    }
  });
}

chorus_status AllGather(chorus_communicator* comm, const chorus_collective_all_gather_args* args,
                        chorus_request** request) {
  return sdk::Guard([&] {
    constexpr const char* kOp = sdk::CollectiveOpName(CHORUS_OP_ALL_GATHER);
    Hierarchical& h = Require(comm, kOp);
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_collective_all_gather_args, dtype),
                         "hierarchical all_gather");
    sdk::RequireDtype(a.dtype, "hierarchical all_gather");
    RequireData(a.send, a.count, "hierarchical all_gather", "send");
    RequireData(a.recv, a.count, "hierarchical all_gather", "recv");
    if (request != nullptr) *request = nullptr;
    std::lock_guard<std::mutex> lock(h.mutex);
    const size_t n = a.count, e = chorus_dtype_size(a.dtype);
    if (n == 0) return;
    const Layout& l = h.layout;
    const size_t local_size = static_cast<size_t>(l.local_size);
    auto* recv = static_cast<unsigned char*>(a.recv);
    // This host's blocks, by local rank.
    const unsigned char* host_blocks = static_cast<const unsigned char*>(a.send);
    if (h.local) {
      unsigned char* gathered = h.cross ? h.Scratch(h.scratch, local_size * n * e) : recv;
      Step(h, kOp, "all_gather within the host",
           [&] { h.local->AllGather(a.send, gathered, n, a.dtype); });
      host_blocks = gathered;
    }
    if (!h.cross) {
      if (!h.local && recv != host_blocks) std::memcpy(recv, host_blocks, n * e);
      return;
    }
    // Every host's blocks, host by host: block h * L + l. In rank order already when ranks are
    // numbered host by host; else gathered aside and put in place.
    unsigned char* all = l.host_major ? recv : h.Scratch(h.scratch2, l.size * n * e);
    Step(h, kOp, "all_gather across hosts",
         [&] { h.cross->AllGather(host_blocks, all, local_size * n, a.dtype); });
    if (!l.host_major) {
      for (int i = 0; i < l.size; ++i) {
        std::memcpy(recv + static_cast<size_t>(l.rank_at[i]) * n * e, all + i * n * e, n * e);
      }
    }
  });
}

chorus_status ReduceScatter(chorus_communicator* comm, const chorus_reduce_scatter_args* args,
                            chorus_request** request) {
  return sdk::Guard([&] {
    constexpr const char* kOp = sdk::CollectiveOpName(CHORUS_OP_REDUCE_SCATTER);
    Hierarchical& h = Require(comm, kOp);
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_scatter_args, op),
                                     "hierarchical reduce_scatter");
    sdk::RequireDtype(a.dtype, "hierarchical reduce_scatter");
    sdk::RequireReduceOp(a.op, "hierarchical reduce_scatter");
    RequireData(a.send, a.recv_count, "hierarchical reduce_scatter", "send");
    RequireData(a.recv, a.recv_count, "hierarchical reduce_scatter", "recv");
    if (request != nullptr) *request = nullptr;
    std::lock_guard<std::mutex> lock(h.mutex);
    const size_t n = a.recv_count, e = chorus_dtype_size(a.dtype);
    if (n == 0) return;
    const Layout& l = h.layout;
    const auto* send = static_cast<const unsigned char*>(a.send);
    if (RunOnOneLevel(h, kOp, send, a.recv, n * e, [&](HostCommunicator& c) {
          c.ReduceScatter(send, a.recv, n, a.dtype, a.op);
        })) {
      return;
    }
    // Blocks ordered by local rank, then host: local rank l's part is the blocks of every rank
    // with local rank l, which it then reduce-scatters across hosts.
    const size_t hosts = static_cast<size_t>(l.hosts);
    unsigned char* ordered = h.Scratch(h.scratch, l.size * n * e);
    for (int local_rank = 0; local_rank < l.local_size; ++local_rank) {
      for (int host = 0; host < l.hosts; ++host) {
        const int r = l.rank_at[host * l.local_size + local_rank];
        std::memcpy(ordered + (local_rank * hosts + host) * n * e, send + r * n * e, n * e);
      }
    }
    unsigned char* mine = h.Scratch(h.scratch2, hosts * n * e);
    Step(h, kOp, "reduce_scatter within the host",
         [&] { h.local->ReduceScatter(ordered, mine, hosts * n, a.dtype, a.op); });
    Step(h, kOp, "reduce_scatter across hosts",
         [&] { h.cross->ReduceScatter(mine, a.recv, n, a.dtype, a.op); });
  });
}

chorus_status Barrier(chorus_communicator* comm, chorus_request** request) {
  return sdk::Guard([&] {
    constexpr const char* kOp = sdk::CollectiveOpName(CHORUS_OP_BARRIER);
    Hierarchical& h = Require(comm, kOp);
    if (request != nullptr) *request = nullptr;
    std::lock_guard<std::mutex> lock(h.mutex);
    if (h.local) Step(h, kOp, "barrier within the host", [&] { h.local->Barrier(); });
    if (h.cross) Step(h, kOp, "barrier across hosts", [&] { h.cross->Barrier(); });
    if (h.local) Step(h, kOp, "second barrier within the host", [&] { h.local->Barrier(); });
  });
}

void Abort(chorus_communicator* comm) {
  if (comm == nullptr) return;
  auto& h = *reinterpret_cast<Hierarchical*>(comm);
  if (h.local) h.local->Abort();
  if (h.cross) h.cross->Abort();
}

// On several hosts of several ranks, composition wins where a collective is better within a host
// than the best one across hosts: it then scores one more than that best flat collective, whose
// score across hosts it asks the host for (as the best for hosts of one rank each, and for the
// whole job: flat collectives serve both).
uint32_t Score(const chorus_score_args* args) {
  if (args->request != CHORUS_REQUEST_AUTO || args->hosts <= 1 || args->ranks_per_host <= 1) {
    return 0;
  }
  try {
    chorus_score_args local = *args;
    local.ranks = args->ranks_per_host;
    local.hosts = 1;
    chorus_score_args cross = *args;
    cross.ranks = args->hosts;
    cross.ranks_per_host = 1;
    const uint32_t within = sdk::BestHostScore(local);
    const uint32_t across = std::max(sdk::BestHostScore(cross), sdk::BestHostScore(*args));
    return within > across && across < CHORUS_SCORE_MAX ? across + 1 : 0;
  } catch (const sdk::Error&) {
    return 0;  // a core without host collectives cannot compose
  }
}

const chorus_capabilities kCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_UNIFORM, sdk::kAllCollectiveOps, Score,
                      CHORUS_CAPABILITY_COMPOSES_BY_HOST);

const chorus_collective_api* CollectiveTable() {
  static const chorus_collective_api table = [] {
    chorus_collective_api t{};
    t.struct_size = sizeof(t);
    t.name = kHierarchicalName;
    t.create = Create;
    t.destroy = Destroy;
    t.all_reduce = AllReduce;
    t.broadcast = Broadcast;
    t.all_gather = AllGather;
    t.reduce_scatter = ReduceScatter;
    t.barrier = Barrier;
    t.abort = Abort;
    t.capabilities = &kCapabilities;
    return t;
  }();
  return &table;
}

}  // namespace

const chorus_collective_api* HierarchicalCollectiveTable() { return CollectiveTable(); }

}  // namespace chorus::hierarchical
