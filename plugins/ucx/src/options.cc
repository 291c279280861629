#include "options.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstdlib>
#include <iterator>
#include <string_view>

namespace chorus::ucx {
namespace {

// Option key -> UCP configuration variable.
constexpr std::pair<std::string_view, const char*> kUcxOptions[] = {{"tls", "TLS"},
                                                                    {"net_devices", "NET_DEVICES"}};

constexpr const char* kKnownOptions =
    "tls, net_devices, same_host, spin_us, yield_us, store_prefix";

// "127.0.0.1:5000", "localhost:5000", "[::1]:5000".
bool IsLoopback(std::string_view address) {
  return address.starts_with("127.") || address.starts_with("localhost") ||
         address.starts_with("[::1]") || address == "::1";
}

}  // namespace

EndpointOptions ParseOptions(const chorus_option* options, size_t count, std::string_view address) {
  if (options == nullptr && count > 0) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "ucx create: options are NULL but num_options is ", count);
  }
  EndpointOptions parsed;
  bool same_host_given = false;
  for (size_t i = 0; i < count; ++i) {
    const std::string_view key = options[i].key == nullptr ? "" : options[i].key;
    const std::string_view value = options[i].value == nullptr ? "" : options[i].value;
    bool known = false;
    for (const auto& [option, variable] : kUcxOptions) {
      if (key != option) continue;
      if (value.empty()) {
        sdk::Fail(CHORUS_INVALID_ARGUMENT, "ucx create: option ", key,
                  " is empty; give a value as UCX_", variable, " takes it (see ucx_info -d)");
      }
      parsed.ucx_settings.emplace_back(variable, value);
      known = true;
    }
    if (known) continue;
    if (key == "spin_us" || key == "yield_us") {
      (key == "spin_us" ? parsed.spin_us : parsed.yield_us) = static_cast<int64_t>(
          std::min<uint64_t>(sdk::IntegerOption(&options[i], 1, key, 0), 1000000));
    } else if (key == "store_prefix") {
      parsed.store_prefix = value;
    } else if (key == "same_host") {
      parsed.same_host = ParseSameHostMode(value, "option same_host");
      same_host_given = true;
    } else {
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "ucx create: unknown option '", key, "'; the ucx ",
                "transport takes ", kKnownOptions, " (UCX's own settings: the UCX_* variables)");
    }
  }
  if (!same_host_given) parsed.same_host = SameHostModeFromEnvironment();
  const bool devices_given =
      std::getenv("UCX_NET_DEVICES") != nullptr ||
      std::any_of(parsed.ucx_settings.begin(), parsed.ucx_settings.end(),
                  [](const auto& setting) { return setting.first == "NET_DEVICES"; });
  if (!devices_given && IsLoopback(address)) parsed.ucx_settings.emplace_back("NET_DEVICES", "lo");
  return parsed;
}

ucp_config_t* ReadConfig(const EndpointOptions& options) {
  ucp_config_t* config = nullptr;
  const ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    sdk::Fail(CHORUS_UNAVAILABLE, "ucx: UCX could not read its configuration (the UCX_* ",
              "variables): ", ucs_status_string(status), "; check them with ucx_info -c");
  }
  for (const auto& [variable, value] : options.ucx_settings) {
    const ucs_status_t modified = ucp_config_modify(config, variable.c_str(), value.c_str());
    if (modified != UCS_OK) {
      ucp_config_release(config);
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "ucx create: UCX refused ", variable, "=", value, ": ",
                ucs_status_string(modified));
    }
  }
  return config;
}

bool SharedMemoryOnly(const EndpointOptions& options) {
  std::string tls;
  bool given = false;
  for (const auto& [name, value] : options.ucx_settings) {
    if (name == "TLS") tls = value, given = true;
  }
  if (!given) {
    const char* env = std::getenv("UCX_TLS");
    if (env == nullptr) return false;
    tls = env;
  }
  // UCX's shared-memory and loopback transports and their aliases; a leading ^ excludes.
  static const char* const kLocal[] = {"sm",    "shm",  "mm",  "posix", "sysv",
                                       "xpmem", "knem", "cma", "self"};
  if (tls.empty() || tls.front() == '^') return false;
  size_t begin = 0;
  while (begin <= tls.size()) {
    const size_t end = std::min(tls.find(',', begin), tls.size());
    const std::string name = tls.substr(begin, end - begin);
    if (std::find(std::begin(kLocal), std::end(kLocal), name) == std::end(kLocal)) return false;
    begin = end + 1;
  }
  return true;
}

TransportSelection SelectionOf(const EndpointOptions& options) {
  TransportSelection selection = SelectionFromEnvironment();
  for (const auto& [name, value] : options.ucx_settings) {
    if (name == "TLS") selection.tls = value;
    if (name == "NET_DEVICES") selection.net_devices = value;
  }
  return selection;
}

std::string DescribeTransportSettings(const EndpointOptions& options) {
  std::string text;
  for (const char* variable : {"TLS", "NET_DEVICES"}) {
    std::string value;
    for (const auto& [name, set] : options.ucx_settings) {
      if (name == variable) value = set + " (option)";
    }
    if (value.empty()) {
      const char* env = std::getenv((std::string("UCX_") + variable).c_str());
      value = env == nullptr ? "unset" : env;
    }
    if (!text.empty()) text += ", ";
    text += std::string("UCX_") + variable + "=" + value;
  }
  return text;
}

}  // namespace chorus::ucx
