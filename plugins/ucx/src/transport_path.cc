#include "transport_path.h"

#include <stdio.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <memory>

namespace chorus::ucx {
namespace {

constexpr std::string_view kSharedMemoryName = "shared_memory";
constexpr std::string_view kPeerFailureName = "peer_failure";

// UCP's transport aliases (ucp_context.c, ucp_tl_aliases: UCX 1.13's, with the InfiniBand ones
// later versions added), each a comma list; ":aux" marks a transport an alias enables for wire-up
// only.
struct TransportAlias {
  std::string_view name;
  std::string_view transports;
};
constexpr TransportAlias kTransportAliases[] = {
    {"mm", "posix,sysv,xpmem"},
    {"sm", "posix,sysv,xpmem,knem,cma"},
    {"shm", "posix,sysv,xpmem,knem,cma"},
    {"ib", "rc_verbs,ud_verbs,rc_mlx5,ud_mlx5,dc_mlx5,gga_mlx5,srd"},
    {"ud_v", "ud_verbs"},
    {"ud_x", "ud_mlx5"},
    {"ud", "ud_mlx5,ud_verbs"},
    {"rc_v", "rc_verbs,ud_verbs:aux"},
    {"rc_x", "rc_mlx5,ud_mlx5:aux"},
    {"rc", "rc_mlx5,ud_mlx5:aux,rc_verbs,ud_verbs:aux"},
    {"dc", "dc_mlx5,ud_mlx5:aux"},
    {"dc_x", "dc_mlx5,ud_mlx5:aux"},
    {"ugni", "ugni_smsg,ugni_udt:aux,ugni_rdma"},
    {"gga", "gga_mlx5"},
};

// The items of a comma list ("a,b" -> {"a", "b"}; empty items dropped).
std::vector<std::string_view> CommaItems(std::string_view text) {
  std::vector<std::string_view> items;
  while (!text.empty()) {
    const size_t comma = std::min(text.find(','), text.size());
    if (comma > 0) items.push_back(text.substr(0, comma));
    text.remove_prefix(std::min(comma + 1, text.size()));
  }
  return items;
}

// A UCX allow list as UCX_TLS and UCX_*_DEVICES take it: "all", "a,b", or "^a,b" (all but).
struct AllowList {
  bool all = true;
  bool negate = false;
  std::vector<std::string> names;

  bool Contains(std::string_view name) const {
    return std::find(names.begin(), names.end(), name) != names.end();
  }
};

AllowList ParseAllowList(const std::optional<std::string>& text) {
  AllowList list;
  if (!text.has_value()) return list;  // unset: UCX's default, "all"
  std::string_view rest = *text;
  list.all = false;
  if (rest.starts_with('^')) {
    list.negate = true;
    rest.remove_prefix(1);
  }
  for (std::string_view item : CommaItems(rest)) list.names.emplace_back(item);
  if (!list.negate && list.Contains("all")) list.all = true;
  return list;
}

// Whether UCP enables `transport` for data under `list` (ucp_is_resource_in_transports_list):
// its name (or "\name", strict) decides first, then the first alias that holds it. A transport
// enabled as ":aux" carries wire-up messages only, so it counts as not enabled here.
bool TransportEnabled(const std::string& transport, const AllowList& list) {
  if (list.all) return true;
  if (list.Contains(transport) || list.Contains("\\" + transport)) return !list.negate;
  if (list.Contains(transport + ":aux") || list.Contains("\\" + transport + ":aux")) return false;
  for (const TransportAlias& alias : kTransportAliases) {
    const std::vector<std::string_view> members = CommaItems(alias.transports);
    const bool data = std::find(members.begin(), members.end(), transport) != members.end();
    const bool aux = std::find(members.begin(), members.end(), transport + ":aux") != members.end();
    if (!data && !aux) continue;
    const std::string name(alias.name);
    if (list.Contains(name) || list.Contains(name + ":aux")) return !list.negate && data;
  }
  return list.negate;
}

// Whether `device` passes UCX_<TYPE>_DEVICES (ucp_is_resource_in_device_list: names, or "all").
bool DeviceEnabled(const std::string& device, const std::optional<std::string>& text) {
  if (!text.has_value()) return true;
  const AllowList list = ParseAllowList(text);
  return list.all || list.Contains(device);
}

bool Named(const UcxResource& resource, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), resource.transport) != names.end();
}

bool AnyNamed(const std::vector<UcxResource>& enabled,
              std::initializer_list<std::string_view> names) {
  return std::any_of(enabled.begin(), enabled.end(),
                     [&](const UcxResource& resource) { return Named(resource, names); });
}

// InfiniBand and RoCE (rc, dc, ud over verbs or mlx5; gga), AWS's srd, Cray's ugni.
bool IsRdma(const UcxResource& resource) {
  const std::string_view name = resource.transport;
  return name.starts_with("rc_") || name.starts_with("dc_") || name.starts_with("ud_") ||
         name.starts_with("ugni_") || name == "srd" || name == "gga_mlx5";
}

bool AnyRdma(const std::vector<UcxResource>& enabled) {
  return std::any_of(enabled.begin(), enabled.end(), IsRdma);
}

UcxResource::DeviceType DeviceTypeOf(uct_device_type_t type) {
  switch (type) {
    case UCT_DEVICE_TYPE_SHM:
      return UcxResource::DeviceType::kSharedMemory;
    case UCT_DEVICE_TYPE_ACC:
      return UcxResource::DeviceType::kAccelerator;
    case UCT_DEVICE_TYPE_SELF:
      return UcxResource::DeviceType::kSelf;
    default:
      return UcxResource::DeviceType::kNetwork;
  }
}

// Lists UCT's resources: every component's memory domains, each opened to list its transports.
ResourceQuery QueryUct() {
  ResourceQuery query;
  uct_component_h* components = nullptr;
  unsigned num_components = 0;
  ucs_status_t status = uct_query_components(&components, &num_components);
  if (status != UCS_OK) {
    query.error = std::string("uct_query_components: ") + ucs_status_string(status);
    return query;
  }
  const std::unique_ptr<uct_component_h, void (*)(uct_component_h*)> components_owner(
      components, uct_release_component_list);
  for (unsigned c = 0; c < num_components; ++c) {
    uct_component_attr_t attributes{};
    attributes.field_mask =
        UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    status = uct_component_query(components[c], &attributes);
    if (status != UCS_OK) {
      query.error = std::string("uct_component_query: ") + ucs_status_string(status);
      return query;
    }
    std::vector<uct_md_resource_desc_t> domains(attributes.md_resource_count);
    attributes.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attributes.md_resources = domains.data();
    if (!domains.empty() && (status = uct_component_query(components[c], &attributes)) != UCS_OK) {
      query.error = std::string("uct_component_query of ") + attributes.name + ": " +
                    ucs_status_string(status);
      return query;
    }
    for (const uct_md_resource_desc_t& domain : domains) {
      // A domain that does not open (a device that went away) offers nothing, as in UCP.
      uct_md_config_t* config = nullptr;
      if (uct_md_config_read(components[c], nullptr, nullptr, &config) != UCS_OK) continue;
      uct_md_h md = nullptr;
      status = uct_md_open(components[c], domain.md_name, config, &md);
      uct_config_release(config);
      if (status != UCS_OK) continue;
      uct_tl_resource_desc_t* resources = nullptr;
      unsigned num_resources = 0;
      if (uct_md_query_tl_resources(md, &resources, &num_resources) == UCS_OK) {
        for (unsigned r = 0; r < num_resources; ++r) {
          query.resources.push_back(
              {resources[r].tl_name, resources[r].dev_name, DeviceTypeOf(resources[r].dev_type)});
        }
        uct_release_tl_resource_list(resources);
      }
      uct_md_close(md);
    }
  }
  return query;
}

std::optional<std::string> Variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

// What ProcessScore answers from, evaluated once.
struct ProcessPaths {
  UcxPath same_host = UcxPath::kNone;
  UcxPath cross_host = UcxPath::kNone;
  bool mode_invalid = false;  // CHORUS_UCX_SAME_HOST is not a valid value: 0
  bool query_failed = false;  // UCT's query failed: 8
};

ProcessPaths EvaluateProcessPaths() {
  ProcessPaths paths;
  SameHostMode mode = kDefaultSameHostMode;
  try {
    mode = SameHostModeFromEnvironment();
  } catch (const sdk::Error& e) {
    paths.mode_invalid = true;
    sdk::Log(CHORUS_LOG_WARN,
             std::string(e.what()) + "; the ucx transport scores 0 for AUTO until it is fixed");
    return paths;
  }
  const ResourceQuery& query = ProcessResources();
  if (query.error.has_value()) {
    paths.query_failed = true;
    sdk::Log(CHORUS_LOG_DEBUG, "ucx: UCT's resource query failed (" + *query.error +
                                   "), so the ucx transport cannot tell which path its bytes "
                                   "take: it scores 8 for AUTO, below the core's tcp");
    return paths;
  }
  const std::vector<UcxResource> enabled =
      EnabledResources(query.resources, SelectionFromEnvironment());
  paths.same_host = SameHostPath(enabled, mode);
  paths.cross_host = CrossHostPath(enabled);
  if (sdk::LogEnabled(CHORUS_LOG_DEBUG)) {
    std::string transports;
    for (const UcxResource& resource : enabled) {
      transports += (transports.empty() ? "" : " ") + resource.transport + "/" + resource.device;
    }
    const auto path = [](UcxPath p) {
      return std::string(UcxPathName(p)) + " (" + std::to_string(PathScore(p)) + ")";
    };
    sdk::Log(CHORUS_LOG_DEBUG, "ucx: AUTO scores from the paths: same host " +
                                   path(paths.same_host) + ", across hosts " +
                                   path(paths.cross_host) +
                                   "; same_host=" + SameHostModeName(mode) + ", transports " +
                                   (transports.empty() ? "none" : transports));
  }
  return paths;
}

}  // namespace

SameHostMode ParseSameHostMode(std::string_view value, std::string_view source) {
  if (value == kSharedMemoryName) return SameHostMode::kSharedMemory;
  if (value == kPeerFailureName) return SameHostMode::kPeerFailure;
  sdk::Fail(CHORUS_INVALID_ARGUMENT, "ucx: ", source, "='", value, "' is neither ",
            kSharedMemoryName, " (same-host peers over shared memory, a dead one noticed through ",
            "its process) nor ", kPeerFailureName,
            " (same-host peers with UCX's peer failure handling, over tcp loopback)");
}

const char* SameHostModeName(SameHostMode mode) {
  return mode == SameHostMode::kSharedMemory ? kSharedMemoryName.data() : kPeerFailureName.data();
}

SameHostMode SameHostModeFromEnvironment() {
  const char* value = std::getenv(kSameHostVariable);
  if (value == nullptr || *value == '\0') return kDefaultSameHostMode;
  return ParseSameHostMode(value, kSameHostVariable);
}

const ResourceQuery& ProcessResources() {
  static const ResourceQuery query = QueryUct();
  return query;
}

TransportSelection SelectionFromEnvironment() {
  TransportSelection selection;
  selection.tls = Variable("UCX_TLS");
  selection.net_devices = Variable("UCX_NET_DEVICES");
  selection.shm_devices = Variable("UCX_SHM_DEVICES");
  selection.acc_devices = Variable("UCX_ACC_DEVICES");
  selection.self_devices = Variable("UCX_SELF_DEVICES");
  return selection;
}

std::vector<UcxResource> EnabledResources(const std::vector<UcxResource>& all,
                                          const TransportSelection& selection) {
  const AllowList transports = ParseAllowList(selection.tls);
  std::vector<UcxResource> enabled;
  for (const UcxResource& resource : all) {
    const std::optional<std::string>* devices = &selection.net_devices;
    switch (resource.type) {
      case UcxResource::DeviceType::kSharedMemory:
        devices = &selection.shm_devices;
        break;
      case UcxResource::DeviceType::kAccelerator:
        devices = &selection.acc_devices;
        break;
      case UcxResource::DeviceType::kSelf:
        devices = &selection.self_devices;
        break;
      case UcxResource::DeviceType::kNetwork:
        break;
    }
    if (DeviceEnabled(resource.device, *devices) &&
        TransportEnabled(resource.transport, transports)) {
      enabled.push_back(resource);
    }
  }
  return enabled;
}

bool SharedMemoryCarriesAlone(const std::vector<UcxResource>& enabled) {
  const bool messages = AnyNamed(enabled, {"posix", "sysv", "xpmem"});
  const bool large_messages = AnyNamed(enabled, {"cma", "knem"});
  return messages && (large_messages || !AnyNamed(enabled, {"tcp"}));
}

bool LanesUseTcp(ucp_ep_h ep) {
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return false;
  ucp_ep_print_info(ep, stream);
  fclose(stream);
  const std::unique_ptr<char, decltype(&free)> owner(text, free);
  std::string_view rest(text, length);
  while (!rest.empty()) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    const std::string_view line = rest.substr(0, end);
    if (line.find("lane[") != std::string_view::npos &&
        line.find("tcp/") != std::string_view::npos) {
      return true;
    }
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  return false;
}

const char* UcxPathName(UcxPath path) {
  switch (path) {
    case UcxPath::kSharedMemory:
      return "shared memory";
    case UcxPath::kRdma:
      return "RDMA";
    case UcxPath::kTcp:
      return "tcp";
    case UcxPath::kNone:
      break;
  }
  return "none";
}

UcxPath SameHostPath(const std::vector<UcxResource>& enabled, SameHostMode mode) {
  if (mode == SameHostMode::kSharedMemory && SharedMemoryCarriesAlone(enabled)) {
    return UcxPath::kSharedMemory;
  }
  // Peer failure handling: UCX picks among the transports that support it.
  if (AnyRdma(enabled)) return UcxPath::kRdma;
  if (AnyNamed(enabled, {"tcp"})) return UcxPath::kTcp;
  // Shared memory alone: UCX refuses peer failure handling and the endpoint connects without.
  if (AnyNamed(enabled, {"posix", "sysv", "xpmem"})) return UcxPath::kSharedMemory;
  return UcxPath::kNone;
}

UcxPath CrossHostPath(const std::vector<UcxResource>& enabled) {
  if (AnyRdma(enabled)) return UcxPath::kRdma;
  const bool tcp_off_host = std::any_of(enabled.begin(), enabled.end(), [](const UcxResource& r) {
    return r.transport == "tcp" && r.device != "lo";
  });
  return tcp_off_host ? UcxPath::kTcp : UcxPath::kNone;
}

uint32_t PathScore(UcxPath path) {
  switch (path) {
    case UcxPath::kSharedMemory:
      return 30;
    case UcxPath::kRdma:
      return 40;
    case UcxPath::kTcp:
      return 8;
    case UcxPath::kNone:
      break;
  }
  return 0;
}

uint32_t ScoreFromPaths(UcxPath same_host, UcxPath cross_host, const chorus_score_args& args) {
  if (args.request != CHORUS_REQUEST_AUTO) return 0;
  if (args.hosts == 1) return PathScore(same_host);
  if (args.hosts > 1 && args.ranks_per_host == 1) return PathScore(cross_host);
  return std::min(PathScore(same_host), PathScore(cross_host));
}

uint32_t ScoreFromResources(const std::vector<UcxResource>& enabled, SameHostMode mode,
                            const chorus_score_args& args) {
  return ScoreFromPaths(SameHostPath(enabled, mode), CrossHostPath(enabled), args);
}

uint32_t ProcessScore(const chorus_score_args& args) {
  // Evaluated once; nothing may escape into the core's C call (std::bad_alloc: as a failed query).
  static const ProcessPaths paths = [] {
    try {
      return EvaluateProcessPaths();
    } catch (const std::exception&) {
      ProcessPaths failed;
      failed.query_failed = true;
      return failed;
    }
  }();
  if (args.request != CHORUS_REQUEST_AUTO || paths.mode_invalid) return 0;
  if (paths.query_failed) return PathScore(UcxPath::kTcp);
  return ScoreFromPaths(paths.same_host, paths.cross_host, args);
}

}  // namespace chorus::ucx
