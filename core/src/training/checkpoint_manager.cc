// CheckpointManager: the directory's layout (<prefix>-<number>, the index "checkpoint", the
// owner record "owner", the lock "lock"), the search for the latest whole checkpoint, and the
// claim of a directory by a job. The header says what each guarantees.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/checkpoint_manager.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/text.h"
#include "training/checkpoint_format.h"
#include "training/writer_outcome.h"

namespace chorus {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexFile = "checkpoint";
constexpr const char* kOwnerFile = "owner";
constexpr const char* kLockFile = "lock";
constexpr std::string_view kIndexKey = "model_checkpoint_path: \"";
constexpr std::string_view kOwnerHeader = "chorus checkpoint directory owner";

std::string Hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string Plural(int64_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

// The number of "<prefix>-<number>", or nullopt for any other name.
std::optional<int64_t> NumberOf(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 ||
      name[prefix.size()] != '-') {
    return std::nullopt;
  }
  const char* begin = name.data() + prefix.size() + 1;
  const char* end = name.data() + name.size();
  if (!std::all_of(begin, end, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int64_t number = 0;
  const auto [at, error] = std::from_chars(begin, end, number);
  if (error != std::errc() || at != end) return std::nullopt;
  return number;
}

// The numbered checkpoints of `directory`, newest (highest number) first.
std::vector<std::pair<int64_t, std::string>> NumberedFiles(const std::string& directory,
                                                           const std::string& prefix) {
  std::vector<std::pair<int64_t, std::string>> files;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const std::optional<int64_t> number = NumberOf(name, prefix);
    std::error_code type_error;
    if (number && it->is_regular_file(type_error)) files.emplace_back(*number, name);
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a > b; });
  return files;
}

// Why `path` is not a whole checkpoint, or nullopt when it is.
std::optional<std::string> Damage(const std::string& path) {
  try {
    internal::DecodeCheckpoint(internal::ReadWholeFile(path), path);
    return std::nullopt;
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

std::string ReadText(const std::string& path, int& error) {
  error = 0;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    error = errno;
    return {};
  }
  std::string text;
  char chunk[4096];
  errno = 0;
  for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), file)) > 0;) text.append(chunk, n);
  if (std::ferror(file)) error = errno != 0 ? errno : EIO;
  std::fclose(file);
  return text;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

std::string Quoted(std::string text) {
  constexpr size_t kShown = 60;
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > kShown) text = text.substr(0, kShown) + "...";
  return "\"" + text + "\"";
}

// What the index of `directory` names: the checkpoint's name, or why it names none.
struct IndexEntry {
  std::string name;
  std::string problem;
};

IndexEntry ReadIndex(const std::string& directory) {
  const std::string path = (fs::path(directory) / kIndexFile).string();
  int error = 0;
  const std::string text = ReadText(path, error);
  if (error == ENOENT) return {"", "there is no index '" + path + "'"};
  if (error != 0) {
    return {"", "the index '" + path + "' cannot be read (" + std::strerror(error) + ")"};
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return {"", "the index '" + path + "' is empty"};
  }
  for (const std::string& line : Lines(text)) {
    if (line.rfind(kIndexKey, 0) != 0 || line.size() <= kIndexKey.size() || line.back() != '"') {
      continue;
    }
    return {line.substr(kIndexKey.size(), line.size() - kIndexKey.size() - 1), ""};
  }
  return {"", "the index '" + path + "' names no checkpoint (it holds " + Quoted(text) + ")"};
}

[[noreturn]] void Fail(chorus_status status, const std::string& message) {
  throw Error(status, message);
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "this host";
  return name;
}

// ---- the owner record

std::string OwnerRecord(const JobIdentity& identity) {
  return std::string(kOwnerHeader) + "\nseed: " + std::to_string(identity.seed) +
         "\nmodel: " + identity.model + "\ncluster: " + identity.cluster + "\n";
}

// The identity an owner record holds, or nullopt when the text is not one.
std::optional<JobIdentity> ParseOwnerRecord(const std::string& text) {
  if (text.rfind(kOwnerHeader, 0) != 0) return std::nullopt;
  JobIdentity identity;
  bool seed = false, model = false, cluster = false;
  for (const std::string& line : Lines(text)) {
    const auto value = [&line](std::string_view key) -> std::optional<std::string> {
      if (line.rfind(key, 0) != 0) return std::nullopt;
      return line.substr(key.size());
    };
    if (auto v = value("seed: ")) {
      const auto [at, error] = std::from_chars(v->data(), v->data() + v->size(), identity.seed);
      seed = error == std::errc() && at == v->data() + v->size();
    } else if (auto m = value("model: ")) {
      identity.model = *m;
      model = true;
    } else if (auto c = value("cluster: ")) {
      identity.cluster = *c;
      cluster = true;
    }
  }
  if (!seed || !model || !cluster) return std::nullopt;
  return identity;
}

std::string Differences(const JobIdentity& a, const JobIdentity& b) {
  std::vector<std::string> parts;
  if (a.seed != b.seed) parts.push_back("seed");
  if (a.model != b.model) parts.push_back("model");
  if (a.cluster != b.cluster) parts.push_back("cluster");
  return ListOf(parts);
}

}  // namespace

// ---- identities

std::string ModelSignature(std::vector<VariableSignature> variables) {
  std::sort(variables.begin(), variables.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<uint8_t> bytes;
  int64_t values = 0;
  for (const VariableSignature& variable : variables) {
    bytes.insert(bytes.end(), variable.name.begin(), variable.name.end());
    bytes.push_back(0);
    const std::string type = std::string(DtypeName(variable.dtype)) + ShapeString(variable.shape);
    bytes.insert(bytes.end(), type.begin(), type.end());
    bytes.push_back(0);
    int64_t elements = 1;
    for (int64_t dim : variable.shape) elements *= dim;
    values += elements;
  }
  return Plural(static_cast<int64_t>(variables.size()), "variable", "variables") + " of " +
         Plural(values, "value", "values") + " (fingerprint " +
         Hex64(internal::Fnv1a64(bytes.data(), bytes.size())) + ")";
}

std::string ModelSignature(const std::vector<Variable>& variables) {
  std::vector<VariableSignature> signatures;
  for (const Variable& variable : variables) {
    signatures.push_back({variable.name(), variable.dtype(), variable.shape()});
  }
  return ModelSignature(std::move(signatures));
}

std::string ClusterShape(const Strategy* strategy) {
  const int workers = strategy != nullptr ? strategy->num_workers() : 1;
  const int replicas = strategy != nullptr ? static_cast<int>(strategy->devices().size()) : 1;
  return Plural(workers, "worker", "workers") + " of " + Plural(replicas, "replica", "replicas") +
         (workers > 1 ? " each" : "");
}

JobIdentity JobIdentity::Of(uint64_t seed, const std::vector<Variable>& variables,
                            const Strategy* strategy) {
  return JobIdentity{seed, ModelSignature(variables), ClusterShape(strategy)};
}

std::string JobIdentity::ToString() const {
  return "seed " + std::to_string(seed) + ", model " + model + ", cluster " + cluster;
}

// ---- finding the latest checkpoint

FoundCheckpoint FindLatestCheckpoint(const std::string& directory, const std::string& prefix) {
  const IndexEntry index = ReadIndex(directory);
  std::string problem = index.problem;
  if (problem.empty()) {
    const fs::path path = fs::path(directory) / index.name;
    std::error_code error;
    const std::string index_path = (fs::path(directory) / kIndexFile).string();
    if (!fs::is_regular_file(path, error)) {
      problem = "the index '" + index_path + "' names " + index.name + ", which is missing";
    } else if (const std::optional<std::string> damage = Damage(path.string())) {
      problem = "the index '" + index_path + "' names " + index.name +
                ", which is not a whole checkpoint (" + *damage + ")";
    } else {
      return {path.string(), NumberOf(path.filename().string(), prefix).value_or(-1), ""};
    }
  }
  const auto files = NumberedFiles(directory, prefix);
  std::error_code error;
  if (files.empty() && !fs::exists(fs::path(directory) / kIndexFile, error)) return {};
  std::vector<std::string> skipped;
  for (const auto& [number, name] : files) {
    const std::string path = (fs::path(directory) / name).string();
    if (const std::optional<std::string> damage = Damage(path)) {
      skipped.push_back(*damage);
      continue;
    }
    std::string warning = problem + "; using " + name + ", the newest whole checkpoint";
    if (!skipped.empty()) warning += " (skipped: " + ListOf(skipped) + ")";
    return {path, number, warning};
  }
  std::string warning =
      problem + "; there is no whole checkpoint (" + prefix + "-<number>) in '" + directory + "'";
  if (!skipped.empty()) warning += ": " + ListOf(skipped);
  return {"", -1, warning};
}

std::string LatestCheckpoint(const std::string& directory, const std::string& prefix) {
  const FoundCheckpoint found = FindLatestCheckpoint(directory, prefix);
  if (!found.warning.empty()) Log().warn("{}", found.warning);
  return found.path;
}

// ---- the lock

// flock on <directory>/lock: exclusive, never waited for, released by the kernel when the
// process ends. Its text says who holds it, for the message of the next one to try.
class CheckpointManager::Lock {
 public:
  Lock(const std::string& directory, const std::string& what) {
    const std::string path = (fs::path(directory) / kLockFile).string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      Fail(CHORUS_INVALID_ARGUMENT, "cannot create the lock file '" + path + "' of the " + what +
                                        ": " + std::strerror(errno));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      int read_error = 0;
      std::string holder = ReadText(path, read_error);
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      ::close(fd_);
      if (error != EWOULDBLOCK) {
        Fail(CHORUS_INVALID_ARGUMENT,
             "cannot lock '" + path + "' of the " + what + ": " + std::strerror(error));
      }
      const std::string self = Holder();
      if (holder == self) {
        Fail(CHORUS_UNAVAILABLE, "the " + what + " '" + directory +
                                     "' is in use by another CheckpointManager of this process (" +
                                     self + "); give each its own directory");
      }
      Fail(CHORUS_UNAVAILABLE,
           "the " + what + " '" + directory + "' is in use by another job: " +
               (holder.empty() ? std::string("a process") : holder) +
               " writes there now (it holds the lock '" + path +
               "'); give this job a directory of its own, or wait until that process has ended");
    }
    // Best effort: the text only improves the next one's message.
    const std::string text = Holder() + "\n";
    if (::ftruncate(fd_, 0) == 0) {
      [[maybe_unused]] const ssize_t written = ::pwrite(fd_, text.data(), text.size(), 0);
    }
  }
  ~Lock() { ::close(fd_); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  static std::string Holder() {
    return "process " + std::to_string(::getpid()) + " on " + HostName();
  }
  int fd_ = -1;
};

// ---- the manager

CheckpointManager::CheckpointManager(std::string directory, JobIdentity identity,
                                     Strategy* strategy, CheckpointManagerOptions options)
    : directory_(std::move(directory)),
      identity_(std::move(identity)),
      strategy_(strategy),
      options_(std::move(options)) {
  if (directory_.empty()) {
    Fail(CHORUS_INVALID_ARGUMENT, "CheckpointManager: the directory is empty");
  }
  if (options_.prefix.empty() || options_.prefix.find('/') != std::string::npos) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "CheckpointManager: the prefix '" + options_.prefix + "' must be a non-empty file name");
  }
  if (options_.max_to_keep < 0) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "CheckpointManager: max_to_keep must be 0 (keep all) or positive, got " +
             std::to_string(options_.max_to_keep));
  }
  writer_ = internal::IsWriter(strategy_);
  internal::RunOnWriter(strategy_, "use the " + options_.what + " '" + directory_ + "'", [this] {
    Claim();
    return std::string();
  });
}

CheckpointManager::~CheckpointManager() = default;

void CheckpointManager::Claim() {
  std::error_code error;
  fs::create_directories(directory_, error);
  if (error || !fs::is_directory(directory_)) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "cannot create the " + options_.what + " '" + directory_ +
             "': " + (error ? error.message() : std::string("a file of that name is in the way")));
  }
  lock_ = std::make_unique<Lock>(directory_, options_.what);

  const std::string owner_path = (fs::path(directory_) / kOwnerFile).string();
  int read_error = 0;
  const std::string text = ReadText(owner_path, read_error);
  if (read_error != 0 && read_error != ENOENT) {
    Fail(CHORUS_INVALID_ARGUMENT, "cannot read the owner record '" + owner_path + "' of the " +
                                      options_.what + ": " + std::strerror(read_error));
  }
  const std::optional<JobIdentity> owner =
      read_error == 0 ? ParseOwnerRecord(text) : std::optional<JobIdentity>();
  if (read_error == 0 && owner != identity_) {
    if (!options_.take_over) {
      const std::string hint = options_.take_over_hint.empty()
                                   ? "CheckpointManagerOptions::take_over"
                                   : options_.take_over_hint;
      const std::string whose = owner
                                    ? "it belongs to another job (" + owner->ToString() +
                                          "; they differ in " + Differences(*owner, identity_) + ")"
                                    : "its owner record '" + owner_path +
                                          "' is unreadable (it holds " + Quoted(text) + ")";
      Fail(CHORUS_INVALID_ARGUMENT,
           "the " + options_.what + " '" + directory_ + "' is not this job's: " + whose +
               "; this job is " + identity_.ToString() +
               ". Its checkpoints are not this job's to resume from or to overwrite: give this "
               "job a directory of its own, or take this one over with " +
               hint + " (its checkpoints then count as this job's)");
    }
    Log().warn(
        "taking over the {} '{}' from {}; this job is {}", options_.what, directory_,
        owner ? "the job " + owner->ToString() : "an unreadable owner record " + Quoted(text),
        identity_.ToString());
  }
  // A new directory (or one of an older chorus, without a record), or one taken over.
  if (owner != identity_) {
    const std::string record = OwnerRecord(identity_);
    internal::WriteFileAtomically(owner_path, std::vector<uint8_t>(record.begin(), record.end()));
  }

  // Temporary files a writer that died left behind: none is being written now (we hold the
  // lock), so they are garbage.
  for (fs::directory_iterator it(directory_, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.find(".tmp.");
    if (at == std::string::npos) continue;
    const std::string target = name.substr(0, at);
    if (target == kIndexFile || target == kOwnerFile || NumberOf(target, options_.prefix)) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

std::string CheckpointManager::Save(const Checkpoint& checkpoint, int64_t number) {
  if (CurrentReplicaContext() != nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "CheckpointManager::Save must be called in cross-replica context or with no strategy, "
         "not inside Strategy::run");
  }
  if (number < 0) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "CheckpointManager::Save: the number must not be negative, got " + std::to_string(number));
  }
  Strategy* strategy = nullptr;
  const std::vector<uint8_t> bytes = checkpoint.Encode(strategy);
  if (strategy != nullptr && strategy != strategy_ && strategy->num_workers() > 1) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "CheckpointManager::Save: the checkpoint's variables are of a multi-worker " +
             strategy->name() +
             ", but the manager was made with another strategy (or none); pass that strategy "
             "to the CheckpointManager, so that its workers agree on the save");
  }
  const std::string name = options_.prefix + "-" + std::to_string(number);
  const std::string path = (fs::path(directory_) / name).string();
  return internal::RunOnWriter(strategy_, "save checkpoint '" + path + "'", [&] {
    internal::WriteFileAtomically(path, bytes);
    const std::string index = std::string(kIndexKey) + name + "\"\n";
    try {
      internal::WriteFileAtomically((fs::path(directory_) / kIndexFile).string(),
                                    std::vector<uint8_t>(index.begin(), index.end()));
    } catch (const Error& e) {
      throw Error(e.status(), name +
                                  " is whole, but the index could not be updated to name it "
                                  "(the index is left as it was): " +
                                  e.what());
    }
    if (options_.max_to_keep > 0) {
      // Numbers above this one are left from an earlier run that got further: not newer.
      int kept = 1;
      for (const auto& [other, other_name] : NumberedFiles(directory_, options_.prefix)) {
        if (other == number) continue;
        if (other < number && kept < options_.max_to_keep) {
          ++kept;
          continue;
        }
        std::error_code ignored;
        fs::remove(fs::path(directory_) / other_name, ignored);
      }
    }
    return path;
  });
}

FoundCheckpoint CheckpointManager::Latest() const {
  FoundCheckpoint found;
  const std::string text = internal::RunOnWriter(
      strategy_, "read the " + options_.what + " '" + directory_ + "'", [this, &found] {
        found = FindLatestCheckpoint(directory_, options_.prefix);
        if (!found.warning.empty()) Log().warn("{}", found.warning);
        return std::to_string(found.number) + "\n" + found.path;
      });
  if (writer_) return found;
  const size_t newline = text.find('\n');
  FoundCheckpoint shared;
  shared.number = std::stoll(text.substr(0, newline));
  shared.path = text.substr(newline + 1);
  return shared;
}

void CheckpointManager::DeleteAll() {
  internal::RunOnWriter(strategy_, "clear the " + options_.what + " '" + directory_ + "'", [this] {
    // The index first (without it nothing is the latest), the owner record last (until it goes,
    // the directory is still this job's).
    std::vector<std::string> names = {kIndexFile};
    for (const auto& [number, name] : NumberedFiles(directory_, options_.prefix)) {
      names.push_back(name);
    }
    names.push_back(kOwnerFile);
    for (const std::string& name : names) {
      std::error_code error;
      fs::remove(fs::path(directory_) / name, error);
      if (error) {
        Fail(CHORUS_INVALID_ARGUMENT,
             "cannot remove '" + (fs::path(directory_) / name).string() + "': " + error.message());
      }
    }
    return std::string();
  });
}

}  // namespace chorus
