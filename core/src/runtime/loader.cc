#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/runtime/loader.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <filesystem>
#include <set>

#include "base/logging.h"

namespace chorus {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "libchorus-";
constexpr const char* kSuffix = ".so";

// CHORUS_PLUGINS, parsed.
struct Filter {
  bool none = false;
  std::vector<std::string> include_names;  // empty: every plugin found
  std::vector<std::string> include_paths;
  std::set<std::string> exclude_names;

  bool Allows(const std::string& name) const {
    if (none || exclude_names.count(name)) return false;
    return include_names.empty() && include_paths.empty()
               ? true
               : std::find(include_names.begin(), include_names.end(), name) != include_names.end();
  }
};

Filter ParseFilter(const std::optional<std::string>& text) {
  Filter filter;
  if (!text) return filter;
  for (const std::string& entry : SplitList(*text, ',')) {
    if (entry == "none") {
      filter.none = true;
    } else if (entry[0] == '^') {
      const std::string name = entry.substr(1);
      if (name.empty()) {
        throw Error(CHORUS_INVALID_ARGUMENT,
                    "CHORUS_PLUGINS='" + *text + "': '^' must be followed by a plugin name");
      }
      filter.exclude_names.insert(name);
    } else if (entry.find('/') != std::string::npos) {
      filter.include_paths.push_back(entry);
    } else {
      filter.include_names.push_back(entry);
    }
  }
  if (filter.none && (!filter.include_names.empty() || !filter.include_paths.empty())) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "CHORUS_PLUGINS='" + *text +
                    "' mixes 'none' with plugins to load; use 'none' alone or list plugins");
  }
  return filter;
}

std::string Canonical(const std::string& dir) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(dir, ec);
  return ec ? dir : canonical.string();
}

std::string JoinStrings(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace

std::string PluginNameFromFileName(const std::string& file_name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (file_name.size() <= prefix.size() + suffix.size()) return "";
  if (file_name.compare(0, prefix.size(), prefix) != 0) return "";
  if (file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  return file_name.substr(prefix.size(), file_name.size() - prefix.size() - suffix.size());
}

LoaderOptions LoaderOptions::FromEnvironment() {
  LoaderOptions options;
  if (auto path = GetEnv("CHORUS_PLUGIN_PATH")) {
    for (const auto& dir : SplitList(*path, ':')) options.search_dirs.push_back(dir);
  }
  // Next to libchorus: <libdir>/chorus/plugins. The build tree has the install's layout, so
  // this is the install's plugin folder for an installed chorus and the build tree's for a
  // built one; an installed chorus never loads plugins from the tree it was built in.
  boost::dll::fs::error_code ec;
  const auto self = boost::dll::this_line_location(ec);
  if (!ec) {
    options.search_dirs.push_back(
        Canonical((self.parent_path() / CHORUS_INSTALL_PLUGIN_SUBDIR).string()));
  } else {
    options.search_dirs.push_back(CHORUS_BUILD_PLUGIN_DIR);
  }
  options.filter = GetEnv("CHORUS_PLUGINS");
  return options;
}

Discovery DiscoverPlugins(const LoaderOptions& options) {
  Discovery result;
  const Filter filter = ParseFilter(options.filter);
  std::set<std::string> seen_dirs;
  std::vector<std::string> dirs;
  for (const auto& dir : options.search_dirs) {
    if (dir.empty()) continue;
    if (seen_dirs.insert(Canonical(dir)).second) dirs.push_back(dir);
  }
  result.searched_dirs = dirs;

  std::vector<std::string> loaded_names;
  auto reject = [&](const std::string& path, const std::string& reason) {
    Log().warn("plugin {} rejected: {}", path, reason);
    result.rejected.push_back({path, reason});
  };
  auto take = [&](const std::string& path, const std::string& expected_name) {
    std::string reason;
    auto plugin = PluginLibrary::Load(path, &reason);
    if (!plugin) return reject(path, reason);
    for (const auto& other : result.loaded) {
      if (other->name() == plugin->name()) {
        return reject(path, "a plugin named '" + plugin->name() + "' was already loaded from " +
                                other->path() + " (earlier in the search order)");
      }
    }
    if (!expected_name.empty() && plugin->name() != expected_name) {
      return reject(path,
                    "expected plugin '" + expected_name + "', found '" + plugin->name() + "'");
    }
    Log().debug("plugin {} loaded from {} (ABI {}.{})", plugin->name(), path, plugin->abi_major(),
                plugin->abi_minor());
    loaded_names.push_back(plugin->name());
    result.loaded.push_back(std::move(plugin));
  };

  if (filter.none) return result;
  for (const auto& path : filter.include_paths) take(path, "");
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      Log().debug("plugin folder {} does not exist; skipped", dir);
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = PluginNameFromFileName(entry.path().filename().string());
      if (!name.empty()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const std::string name = PluginNameFromFileName(file.filename().string());
      if (!filter.Allows(name)) {
        Log().debug("plugin {} skipped: excluded by CHORUS_PLUGINS", file.string());
        continue;
      }
      if (std::find(loaded_names.begin(), loaded_names.end(), name) != loaded_names.end()) {
        Log().debug("plugin {} skipped: '{}' already loaded earlier in the search order",
                    file.string(), name);
        continue;
      }
      take(file.string(), name);
    }
  }
  std::vector<std::string> missing;
  for (const auto& name : filter.include_names) {
    const bool loaded =
        std::find(loaded_names.begin(), loaded_names.end(), name) != loaded_names.end();
    const bool tried = std::any_of(result.rejected.begin(), result.rejected.end(), [&](auto& r) {
      return PluginNameFromFileName(fs::path(r.path).filename().string()) == name;
    });
    if (!loaded && !tried) missing.push_back(name);
  }
  if (!missing.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "CHORUS_PLUGINS names " + JoinStrings(missing, ", ") + " but no libchorus-" +
                    missing[0] + ".so is in the plugin folders (" + JoinStrings(dirs, ":") +
                    "); plugins found: " +
                    (loaded_names.empty() ? "(none)" : JoinStrings(loaded_names, ", ")) +
                    ". Add its folder to CHORUS_PLUGIN_PATH or fix the name");
  }
  return result;
}

}  // namespace chorus
