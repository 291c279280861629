#include "runtime/plugin_vetting.h"

#include <chorus/base/environment.h>
#include <chorus/plugin.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/plugin_library.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

#include "base/fnv1a.h"
#include "base/logging.h"

extern char** environ;

namespace chorus::internal {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kVetProgram = "chorus-plugin-vet";
constexpr const char* kCacheFormat = "chorus plugin vetting 1";
// How much of a child's output is kept for the reason.
constexpr size_t kMaxOutput = 4096;

// A file as it is now: a verdict holds while these are unchanged.
struct Stamp {
  std::string canonical;
  uintmax_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const Stamp&) const = default;
};

std::optional<Stamp> StampOf(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  Stamp stamp;
  stamp.canonical = ec ? path : canonical.string();
  stamp.size = static_cast<uintmax_t>(info.st_size);
  stamp.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  return stamp;
}

struct Verdict {
  Stamp stamp;
  std::string reason;  // "" when the file may be loaded
};

// Verdicts this process has reached or read, by cache folder and canonical path. Never destroyed.
std::mutex& MemoMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::map<std::string, Verdict>& Memo() {
  static auto* memo = new std::map<std::string, Verdict>();
  return *memo;
}

// A folder for the verdicts that exists (or can be made) and can be written, "" when none can.
bool Writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

// A folder of this user's only under the temporary folder, for a process without a writable
// home: made with mode 0700, and used only when it is a real folder of this user's with no
// access for others (another user could otherwise plant verdicts).
bool PrivateTemporary(const std::string& dir) {
  ::mkdir(dir.c_str(), 0700);
  struct stat info {};
  return ::lstat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::getuid() &&
         (info.st_mode & 077) == 0;
}

std::string CacheDir() {
  if (auto dir = GetEnv("CHORUS_CACHE_DIR")) return *dir + "/plugin-vetting";
  std::string base;
  if (auto dir = GetEnv("XDG_CACHE_HOME")) {
    base = *dir + "/chorus";
  } else if (auto home = GetEnv("HOME")) {
    base = *home + "/.cache/chorus";
  }
  if (!base.empty() && Writable(base + "/plugin-vetting")) return base + "/plugin-vetting";
  // No writable home (a batch system's, a container's): else every process would try every
  // plugin again.
  const std::string temporary =
      GetEnv("TMPDIR").value_or("/tmp") + "/chorus-cache-" + std::to_string(::getuid());
  if (PrivateTemporary(temporary) && Writable(temporary + "/plugin-vetting")) {
    return temporary + "/plugin-vetting";
  }
  return "";
}

std::string CacheFileOf(const Stamp& stamp) {
  const std::string dir = CacheDir();
  if (dir.empty()) return "";
  char name[32];
  std::snprintf(name, sizeof name, "%016llx",
                static_cast<unsigned long long>(Fnv1a64(stamp.canonical)));
  return dir + "/" + name;
}

std::string AbiText() {
  return std::to_string(CHORUS_ABI_MAJOR) + "." + std::to_string(CHORUS_ABI_MINOR);
}

std::optional<Verdict> ReadCache(const Stamp& stamp) {
  const std::string file = CacheFileOf(stamp);
  if (file.empty()) return std::nullopt;
  std::ifstream in(file);
  std::string format, path, size, mtime, abi, verdict, reason;
  if (!std::getline(in, format) || format != kCacheFormat || !std::getline(in, path) ||
      !std::getline(in, size) || !std::getline(in, mtime) || !std::getline(in, abi) ||
      !std::getline(in, verdict)) {
    return std::nullopt;
  }
  std::getline(in, reason);
  if (path != stamp.canonical || size != std::to_string(stamp.size) ||
      mtime != std::to_string(stamp.mtime_ns) || abi != AbiText() ||
      (verdict != "ok" && verdict != "rejected")) {
    return std::nullopt;
  }
  return Verdict{stamp, verdict == "ok" ? "" : reason};
}

// Written to a temporary name and renamed, so a reader never sees half a file; a cache that
// cannot be written only means the file is tried again by the next process.
void WriteCache(const Verdict& verdict) {
  const std::string file = CacheFileOf(verdict.stamp);
  if (file.empty()) return;
  std::error_code ec;
  fs::create_directories(fs::path(file).parent_path(), ec);
  const std::string temporary =
      file + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << kCacheFormat << "\n"
        << verdict.stamp.canonical << "\n"
        << verdict.stamp.size << "\n"
        << verdict.stamp.mtime_ns << "\n"
        << AbiText() << "\n"
        << (verdict.reason.empty() ? "ok" : "rejected") << "\n"
        << verdict.reason << "\n";
    if (!out) {
      Log().debug("plugin vetting: cannot write {}; the file will be tried again", temporary);
      fs::remove(temporary, ec);
      return;
    }
  }
  if (std::rename(temporary.c_str(), file.c_str()) != 0) fs::remove(temporary, ec);
}

// The vetting program: <libdir>/chorus/chorus-plugin-vet beside libchorus (the build tree has
// the install's layout).
std::string VetProgram() {
  boost::dll::fs::error_code ec;
  const auto self = boost::dll::this_line_location(ec);
  if (ec) return "";
  const std::string program = (self.parent_path() / "chorus" / kVetProgram).string();
  return ::access(program.c_str(), X_OK) == 0 ? program : "";
}

std::string SignalText(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  const char* description = strsignal(signal);
  return (abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(signal)) +
         (description ? std::string(", ") + description : "");
}

// The child's last line of output, for the reason (an AddressSanitizer report, an abort's text).
std::string LastLine(const std::string& output) {
  std::istringstream lines(output);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  return last;
}

struct Child {
  std::string path;
  Stamp stamp;
  pid_t pid = -1;
  int output_fd = -1;
  std::string output;
  bool done = false;
  int status = 0;
  bool timed_out = false;
};

bool Spawn(const std::string& program, Child* child) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string argument0 = program, argument1 = child->path;
  char* argv[] = {argument0.data(), argument1.data(), nullptr};
  const int error =
      ::posix_spawn(&child->pid, program.c_str(), &actions, &attributes, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(fds[1]);
  if (error != 0) {
    ::close(fds[0]);
    Log().debug("plugin vetting: cannot start {} ({}); {} is loaded untried", program,
                std::strerror(error), child->path);
    return false;
  }
  child->output_fd = fds[0];
  ::fcntl(child->output_fd, F_SETFL, O_NONBLOCK);
  return true;
}

void ReadOutput(Child* child) {
  char buffer[1024];
  for (;;) {
    const ssize_t n = ::read(child->output_fd, buffer, sizeof buffer);
    if (n <= 0) return;
    if (child->output.size() < kMaxOutput) child->output.append(buffer, static_cast<size_t>(n));
  }
}

// Waits for every child, until `deadline`; those still running then are killed.
void WaitAll(std::vector<Child>* children, Clock::time_point deadline) {
  for (;;) {
    bool running = false;
    for (Child& child : *children) {
      if (child.done || child.pid < 0) continue;
      ReadOutput(&child);
      const pid_t ended = ::waitpid(child.pid, &child.status, WNOHANG);
      if (ended == child.pid || (ended < 0 && errno != EINTR)) {
        child.done = true;
        ReadOutput(&child);
        ::close(child.output_fd);
      } else {
        running = true;
      }
    }
    if (!running) return;
    if (Clock::now() >= deadline) break;
    std::vector<pollfd> fds;
    for (const Child& child : *children) {
      if (!child.done && child.pid >= 0) fds.push_back({child.output_fd, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 20);
  }
  for (Child& child : *children) {
    if (child.done || child.pid < 0) continue;
    ::kill(child.pid, SIGKILL);
    while (::waitpid(child.pid, &child.status, 0) < 0 && errno == EINTR) {
    }
    child.done = true;
    child.timed_out = true;
    ReadOutput(&child);
    ::close(child.output_fd);
  }
}

std::string ReasonOf(const Child& child, std::chrono::milliseconds timeout) {
  const std::string tried =
      "when chorus opened it in a separate process to try it (" + std::string(kVetProgram) + ")";
  const std::string name = PluginNameFromFileName(fs::path(child.path).filename().string());
  const std::string fix =
      "; it is not loaded, and this process goes on without it. Fix or remove the file" +
      (name.empty() ? std::string() : " (CHORUS_PLUGINS=^" + name + " leaves it out)");
  const std::string last = LastLine(child.output);
  const std::string said = last.empty() ? "" : " (its last words: " + last + ")";
  if (child.timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.0f", std::ceil(timeout.count() / 1000.0));
    return std::string("opening it did not finish within ") + seconds + " s " + tried +
           ": a library constructor or chorus_plugin_get() never returns" +
           " (CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS sets the limit)" + said + fix;
  }
  if (WIFSIGNALED(child.status)) {
    return "opening it crashed the process " + tried + ": killed by " +
           SignalText(WTERMSIG(child.status)) +
           " in a library constructor or in chorus_plugin_get()" + said + fix;
  }
  if (WIFEXITED(child.status) && WEXITSTATUS(child.status) != 0 && WEXITSTATUS(child.status) != 2) {
    return "opening it ended the process " + tried + " with exit status " +
           std::to_string(WEXITSTATUS(child.status)) +
           ": a library constructor or chorus_plugin_get() exits the process" + said + fix;
  }
  return "";
}

}  // namespace

std::chrono::milliseconds PluginLoadTimeout() {
  return std::chrono::seconds(GetEnvInteger("CHORUS_PLUGIN_LOAD_TIMEOUT_SECONDS", 30, 1, 86400));
}

std::map<std::string, std::string> VetPluginFiles(const std::vector<std::string>& paths) {
  std::map<std::string, std::string> rejected;
  if (auto setting = GetEnv("CHORUS_PLUGIN_VETTING"); setting && *setting == "0") return rejected;
  std::vector<Child> children;
  {
    std::lock_guard<std::mutex> lock(MemoMutex());
    for (const std::string& path : paths) {
      const std::optional<Stamp> stamp = StampOf(path);
      if (!stamp) continue;  // the load reports a file that is not there
      const std::string key = CacheDir() + "|" + stamp->canonical;
      auto known = Memo().find(key);
      if (known == Memo().end() || !(known->second.stamp == *stamp)) {
        if (std::optional<Verdict> cached = ReadCache(*stamp)) {
          known = Memo().insert_or_assign(key, *cached).first;
        }
      }
      if (known != Memo().end() && known->second.stamp == *stamp) {
        if (!known->second.reason.empty()) rejected[path] = known->second.reason;
        continue;
      }
      Child child;
      child.path = path;
      child.stamp = *stamp;
      children.push_back(std::move(child));
    }
  }
  if (children.empty()) return rejected;
  const std::string program = VetProgram();
  if (program.empty()) {
    Log().debug("plugin vetting: no {} beside libchorus; plugins are loaded untried", kVetProgram);
    return rejected;
  }
  const auto timeout = PluginLoadTimeout();
  for (Child& child : children) {
    Log().debug("plugin vetting: trying {} in a separate process", child.path);
    if (!Spawn(program, &child)) child.done = true;
  }
  WaitAll(&children, Clock::now() + timeout);
  std::lock_guard<std::mutex> lock(MemoMutex());
  for (const Child& child : children) {
    if (child.pid < 0) continue;  // not started: nothing learnt
    Verdict verdict{child.stamp, ReasonOf(child, timeout)};
    if (!verdict.reason.empty()) rejected[child.path] = verdict.reason;
    WriteCache(verdict);
    Memo().insert_or_assign(CacheDir() + "|" + child.stamp.canonical, std::move(verdict));
  }
  return rejected;
}

int VetPluginInThisProcess(const char* path) {
  void* library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return 2;
  using Entry = const chorus_plugin* (*)(const chorus_host*);
  auto entry = reinterpret_cast<Entry>(::dlsym(library, CHORUS_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) return 2;
  try {
    (void)entry(CoreHost());
  } catch (...) {
    return 2;  // the load reports it, with the exception's text
  }
  return 0;
}

}  // namespace chorus::internal
