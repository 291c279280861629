#include "report.h"

#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>

#include <filesystem>
#include <iomanip>

namespace chorus::info {

namespace {

std::string Bytes(uint64_t bytes) {
  if (bytes == 0) return "unknown";
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  return out.str();
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "(nothing)" : out;
}

}  // namespace

void PrintSearchPath(const Registry& registry, std::ostream& out) {
  out << "Plugin folders, in search order:\n";
  for (const auto& dir : registry.searched_dirs()) {
    std::error_code ec;
    out << "  " << dir << (std::filesystem::is_directory(dir, ec) ? "" : "  (does not exist)")
        << "\n";
  }
  auto filter = GetEnv("CHORUS_PLUGINS");
  out << "CHORUS_PLUGINS: " << (filter ? *filter : "(unset: load every plugin found)") << "\n";
}

void PrintPlugins(const Registry& registry, std::ostream& out) {
  out << "\nPlugins loaded (" << registry.plugins().size() << "):\n";
  for (const auto& plugin : registry.plugins()) {
    out << "  " << plugin->name() << "  ABI " << plugin->abi_major() << "." << plugin->abi_minor()
        << "  version " << plugin->version() << "\n"
        << "    path:     " << plugin->path() << "\n"
        << "    provides: " << Join(plugin->Provides()) << "\n";
    if (!plugin->description().empty()) out << "    about:    " << plugin->description() << "\n";
    for (const auto& note : plugin->notes()) out << "    note:     " << note << "\n";
  }
}

void PrintDevices(const Registry& registry, std::ostream& out) {
  out << "\nDevices:\n";
  try {
    for (const auto& enumerator : registry.DeviceEnumerators()) {
      out << "  platform " << enumerator->platform() << " (plugin " << enumerator->library().name()
          << "): " << enumerator->count() << " device(s)\n";
      for (uint32_t i = 0; i < enumerator->count(); ++i) {
        const DeviceInfo& info = enumerator->info(i);
        out << "    [" << i << "] " << info.name << "  kind " << DeviceKindName(info.kind)
            << "  memory " << Bytes(info.memory_bytes);
        if (info.numa_node >= 0) out << "  numa " << info.numa_node;
        if (!info.pci_bus_id.empty()) out << "  pci " << info.pci_bus_id;
        out << "\n";
      }
    }
  } catch (const Error& e) {
    out << "  error: " << e.what() << "\n";
  }
}

void PrintSelection(const Registry& registry, std::ostream& out) {
  out << "\nSelected by the current variables:\n";
  try {
    const auto devices = registry.DefaultDevices();
    std::vector<std::string> names;
    for (const auto& device : devices) names.push_back(device.name());
    out << "  default devices:  " << Join(names) << "\n";
    const auto selection = SelectCrossDeviceOps(registry, "", devices);
    out << "  cross-device ops: " << selection.name << "  (" << selection.source << ")\n";
  } catch (const Error& e) {
    out << "  error: " << e.what() << "\n";
  }
  out << "  available cross-device ops: " << Join(registry.CrossDeviceOpsNames()) << "\n";
}

void PrintRejected(const Registry& registry, std::ostream& out) {
  out << "\nRejected candidates (" << registry.rejected().size() << "):\n";
  for (const auto& rejection : registry.rejected()) {
    out << "  " << rejection.path << "\n    reason: " << rejection.reason << "\n";
  }
}

}  // namespace chorus::info
