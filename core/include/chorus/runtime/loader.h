// Plugin discovery: which folders are searched, which files are candidates, which are loaded
// and why each rejected one was rejected.
#ifndef CHORUS_LOADER_H_
#define CHORUS_LOADER_H_

#include <chorus/runtime/plugin_library.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

struct LoaderOptions {
  // Folders searched in order for libchorus-<name>.so.
  std::vector<std::string> search_dirs;
  // CHORUS_PLUGINS: comma list of names or paths; "none"; "^name" excludes. nullopt = all.
  std::optional<std::string> filter;

  // CHORUS_PLUGIN_PATH folders, then <libdir>/chorus/plugins next to libchorus, then the build
  // tree's plugin folder (while it exists); filter from CHORUS_PLUGINS.
  static LoaderOptions FromEnvironment();
};

struct Rejection {
  std::string path;    // the file (the folder, in Discovery::unreadable_dirs)
  std::string reason;  // a sentence naming the problem and what would fix it
};

struct Discovery {
  std::vector<std::shared_ptr<PluginLibrary>> loaded;  // in search order, first name wins
  std::vector<Rejection> rejected;
  std::vector<std::string> searched_dirs;
  // Folders of searched_dirs that exist but could not be listed (a file, no permission, a loop
  // of links), each with why; their plugins are not loaded. A missing folder is not listed here.
  std::vector<Rejection> unreadable_dirs;
};

// Finds and loads plugins. Never throws for a bad plugin or folder: it lands in `rejected` or
// `unreadable_dirs`, logged at warn. Throws Error for a CHORUS_PLUGINS value that is malformed or
// names what is not there (INVALID_ARGUMENT: a name, included or excluded with '^', of no plugin
// in the folders; NOT_FOUND: a file that does not exist), naming the entry and the plugins found,
// before any plugin is loaded.
Discovery DiscoverPlugins(const LoaderOptions& options);

// "libchorus-foo.so" -> "foo"; "" for a file not named like a plugin.
std::string PluginNameFromFileName(const std::string& file_name);

}  // namespace chorus

#endif  // CHORUS_LOADER_H_
