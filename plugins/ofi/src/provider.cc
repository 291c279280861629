#include "provider.h"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <chorus/plugin_sdk.hpp>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

namespace chorus::ofi {
namespace {

constexpr uint32_t kFabricVersion = FI_VERSION(1, 17);
constexpr const char* kDefaultProvider = "tcp;ofi_rxm";

// Hints for what the endpoint needs; `provider` empty leaves the provider open.
InfoPtr Hints(const std::string& provider, bool directed) {
  InfoPtr hints(Fabric().dupinfo(nullptr));  // fi_allocinfo()
  if (!hints) sdk::Fail(CHORUS_OUT_OF_MEMORY, "ofi: fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV | (directed ? FI_DIRECTED_RECV : 0);
  // The application may hand a struct fi_context2 with every operation (it does).
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // Messages of one pair and tag arrive in the order sent (plugin.h).
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  // Host memory without registration: the endpoint supports no FI_MR_* mode bit.
  hints->domain_attr->mr_mode = 0;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

InfoPtr GetInfo(const fi_info& hints, const char* node, uint64_t flags, int* code) {
  fi_info* found = nullptr;
  *code = Fabric().getinfo(kFabricVersion, node, nullptr, flags, &hints, &found);
  return InfoPtr(*code == 0 ? found : nullptr);
}

bool IsSocketAddress(uint32_t format) {
  return format == FI_SOCKADDR || format == FI_SOCKADDR_IN || format == FI_SOCKADDR_IN6;
}

// The providers that serve the transport here, for the message of a failed search.
std::string ServingProviders() {
  std::set<std::string> names;
  for (bool directed : {true, false}) {
    InfoPtr hints = Hints("", directed);
    int code = 0;
    InfoPtr list = GetInfo(*hints, nullptr, 0, &code);
    for (const fi_info* i = list.get(); i != nullptr; i = i->next) {
      if (i->fabric_attr != nullptr && i->fabric_attr->prov_name != nullptr) {
        names.insert(i->fabric_attr->prov_name);
      }
    }
  }
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

}  // namespace

std::string FabricError(int code) {
  return std::string(Fabric().strerror(code < 0 ? -code : code)) + " (" + std::to_string(code) +
         ")";
}

std::string ChooseProvider(const std::string& option) {
  std::string provider = kDefaultProvider;
  const char* variable = std::getenv("FI_PROVIDER");
  if (!option.empty()) {
    provider = option;
  } else if (variable != nullptr && *variable != '\0') {
    provider = variable;
  }
  return provider;
}

InfoPtr FindProvider(const std::string& provider, const std::string& bind_host, bool ask_directed) {
  int code = 0;
  for (bool directed : {true, false}) {
    if (directed && !ask_directed) continue;
    InfoPtr hints = Hints(provider, directed);
    InfoPtr found = GetInfo(*hints, nullptr, 0, &code);
    if (!found) continue;
    if (!IsSocketAddress(found->addr_format) || bind_host.empty()) return found;
    // A socket provider: listen at bind_host only (FI_SOURCE: node is the local address).
    hints->addr_format = found->addr_format;
    InfoPtr bound = GetInfo(*hints, bind_host.c_str(), FI_SOURCE, &code);
    if (bound) return bound;
    sdk::Fail(CHORUS_UNAVAILABLE, "ofi: provider '", provider, "' cannot listen at ", bind_host,
              " (fi_getinfo: ", FabricError(code),
              "); set the option address to an address of this host");
  }
  const char* variable = std::getenv("FI_PROVIDER");
  sdk::Fail(CHORUS_UNAVAILABLE, "ofi: no libfabric provider '", provider,
            "' offers reliable-datagram endpoints (FI_EP_RDM) with tagged messages in order "
            "(fi_getinfo: ",
            FabricError(code), "); providers that do here: ", ServingProviders(),
            ". Set the option provider or FI_PROVIDER to one of them (e.g. FI_PROVIDER=verbs on "
            "InfiniBand, efa on AWS)",
            variable != nullptr ? std::string("; FI_PROVIDER is '") + variable +
                                      "', which also filters what libfabric lists"
                                : std::string());
}

bool GrantsDirectedReceive(const fi_info& info) { return (info.caps & FI_DIRECTED_RECV) != 0; }

size_t RxmEagerLimit(const fi_info& info) {
  const char* name = info.fabric_attr != nullptr ? info.fabric_attr->prov_name : nullptr;
  if (name == nullptr || std::string_view(name) != "tcp;ofi_rxm") return 0;
  for (const char* variable : {"FI_OFI_RXM_EAGER_LIMIT", "FI_OFI_RXM_BUFFER_SIZE"}) {
    const char* text = std::getenv(variable);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (*end == '\0' && value > 0) return static_cast<size_t>(value);
  }
  return 16384;
}

}  // namespace chorus::ofi
