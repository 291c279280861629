// Trying a plugin file in a child process before this process opens it. A plugin runs code the
// moment it is opened (its libraries' constructors, then chorus_plugin_get), and every chorus
// process opens every plugin it finds, whether or not the job will use it: without this, one
// file whose entry point crashes or never returns would end or hang every job on the machine,
// and nothing would name the file.
//
// So a file is first opened by `chorus-plugin-vet` (installed beside the plugins' folder), which
// calls its entry point and exits. A child that crashes, exits on its own or does not finish
// within CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS (default 30) gets the file rejected with that
// reason, and the job goes on without it. The verdict is kept in a cache file per plugin file,
// keyed by its path, size and modification time (CHORUS_CACHE_DIR, else $XDG_CACHE_HOME/chorus,
// else ~/.cache/chorus, else, when that cannot be written, a folder of the user's own under
// $TMPDIR or /tmp), so a file is tried once, not once per process: a changed or replaced file is
// tried again. CHORUS_PLUGIN_VETTING=0 turns it off (a crash at load then ends the process,
// naming the file).
//
// Why a child process rather than a signal handler: a crash inside a library's constructor
// leaves the dynamic loader's lock held and the library half-initialised, and a hang cannot be
// interrupted at all; only another process can survive both. Why a separate program rather than
// fork(): the child must call dlopen, which is not safe in a forked child of a threaded process.
#ifndef CHORUS_RUNTIME_PLUGIN_VETTING_H_
#define CHORUS_RUNTIME_PLUGIN_VETTING_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace chorus::internal {

// Tries every file of `paths` not tried before (in parallel). Returns, for each file that must
// not be loaded, why not; a file missing from the result may be loaded.
std::map<std::string, std::string> VetPluginFiles(const std::vector<std::string>& paths);

// How long opening a plugin may take: CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS, default 30.
std::chrono::milliseconds PluginLoadTimeout();

// The child's side, run by chorus-plugin-vet: opens `path`, calls its entry point and returns
// 0, or returns 2 when the file cannot be opened at all (that is reported when the job loads
// it). Never returns when the plugin crashes or hangs, which is the point.
int VetPluginInThisProcess(const char* path);

}  // namespace chorus::internal

#endif  // CHORUS_RUNTIME_PLUGIN_VETTING_H_
