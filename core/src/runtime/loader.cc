#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/runtime/loader.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <filesystem>
#include <set>

#include "base/logging.h"
#include "runtime/plugin_vetting.h"

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

namespace {

// The plugin files of one folder, sorted, appended to `files`. A folder that does not exist is
// skipped quietly (the default search path names folders that need not exist); one that exists
// but cannot be listed is skipped with a warning and recorded, since the plugins in it are lost.
void ListFolder(const std::string& dir, std::vector<fs::path>* files,
                std::vector<Rejection>* unreadable) {
  const auto skip = [&](const std::string& reason) {
    Log().warn("plugin folder {} skipped: {}", dir, reason);
    unreadable->push_back({dir, reason});
  };
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (status.type() == fs::file_type::not_found) {
    Log().debug("plugin folder {} does not exist; skipped", dir);
    return;
  }
  if (ec) {
    return skip("it cannot be read (" + ec.message() +
                "); make it a readable folder or remove it from CHORUS_PLUGIN_PATH");
  }
  if (!fs::is_directory(status)) {
    return skip(std::string(fs::is_regular_file(status) ? "it is a file" : "it is no folder") +
                ", and CHORUS_PLUGIN_PATH lists folders: remove it from there (a single plugin "
                "file may be named in CHORUS_PLUGINS instead)");
  }
  std::vector<fs::path> found;
  fs::directory_iterator entry(dir, ec);
  for (; !ec && entry != fs::directory_iterator(); entry.increment(ec)) {
    if (!PluginNameFromFileName(entry->path().filename().string()).empty()) {
      found.push_back(entry->path());
    }
  }
  if (ec) {
    return skip("it cannot be listed (" + ec.message() +
                "); fix its permissions (chmod a+rx) or remove it from CHORUS_PLUGIN_PATH");
  }
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
}

// CHORUS_PLUGINS checked against what is there before anything is loaded: every name it includes
// or excludes is a plugin in the folders, and every path it names exists. A typo otherwise loads
// the wrong plugins silently.
void CheckFilter(const std::string& text, const Filter& filter, const std::set<std::string>& names,
                 const std::vector<std::string>& dirs, const std::vector<Rejection>& unreadable) {
  const std::string there =
      " (" + JoinStrings(dirs, ":") + "); plugins found: " +
      (names.empty() ? "(none)"
                     : JoinStrings(std::vector<std::string>(names.begin(), names.end()), ", "));
  // What the variable names may be in a folder that could not be read.
  std::string skipped;
  for (const auto& folder : unreadable) {
    skipped += ". The plugin folder " + folder.path + " was skipped: " + folder.reason;
  }
  std::set<std::string> named_by_path;
  for (const auto& path : filter.include_paths) {
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec) {
      throw Error(CHORUS_NOT_FOUND,
                  "CHORUS_PLUGINS='" + text + "' names the file " + path + ", which " +
                      (status.type() == fs::file_type::not_found
                           ? std::string("does not exist")
                           : "cannot be examined (" + ec.message() + ")") +
                      ". Fix the path, or name a plugin of the plugin folders" + there + skipped);
    }
    if (fs::is_directory(status)) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "CHORUS_PLUGINS='" + text + "' names " + path +
                      ", a folder; CHORUS_PLUGINS names plugins or plugin files, and folders go "
                      "in CHORUS_PLUGIN_PATH");
    }
    named_by_path.insert(PluginNameFromFileName(fs::path(path).filename().string()));
  }
  std::vector<std::string> missing;
  for (const auto& name : filter.include_names) {
    if (!names.count(name) && !named_by_path.count(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "CHORUS_PLUGINS names " + JoinStrings(missing, ", ") + " but no libchorus-" +
                    missing[0] + ".so is in the plugin folders" + there +
                    ". Add its folder to CHORUS_PLUGIN_PATH or fix the name" + skipped);
  }
  for (const auto& name : filter.exclude_names) {
    if (names.count(name)) continue;
    throw Error(CHORUS_INVALID_ARGUMENT,
                "CHORUS_PLUGINS='" + text + "' excludes '" + name +
                    "', but no plugin of that name is in the plugin folders" + there +
                    ". Fix the name after '^' or remove the entry" + skipped);
  }
}

}  // namespace

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
  if (filter.none) return result;

  // Every candidate, in search order, before any is opened.
  std::vector<fs::path> files;
  for (const auto& dir : dirs) ListFolder(dir, &files, &result.unreadable_dirs);
  std::set<std::string> names;
  for (const auto& file : files) names.insert(PluginNameFromFileName(file.filename().string()));
  if (options.filter) CheckFilter(*options.filter, filter, names, dirs, result.unreadable_dirs);

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

  // Every file about to be opened is tried in a child process first, all at once (the verdicts
  // are cached, so this costs a process start only for a file not seen before).
  {
    std::vector<std::string> to_open(filter.include_paths.begin(), filter.include_paths.end());
    std::set<std::string> names_to_open;
    for (const auto& file : files) {
      const std::string name = PluginNameFromFileName(file.filename().string());
      if (filter.Allows(name) && names_to_open.insert(name).second)
        to_open.push_back(file.string());
    }
    internal::VetPluginFiles(to_open);
  }
  for (const auto& path : filter.include_paths) take(path, "");
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
  return result;
}

}  // namespace chorus
