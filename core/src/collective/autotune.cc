#include "collective/autotune.h"

#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <fcntl.h>
#include <pwd.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/fnv1a.h"

namespace chorus::internal {
namespace {

// The first line of every cache, with the format's version: a reader refuses other formats.
constexpr const char* kMagic = "#! chorus-tuning-cache 1";
// The last line: a file without it was cut short (a full disk, a writer killed before rename
// existed, a copy interrupted).
constexpr const char* kEnd = "#! end";

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

std::string FormatMicroseconds(double us) {
  char text[32];
  std::snprintf(text, sizeof text, us < 100 ? "%.1f" : "%.0f", us);
  return text;
}

std::string UserName(uid_t uid) {
  if (const passwd* entry = getpwuid(uid)) return entry->pw_name;
  return "uid " + std::to_string(uid);
}

std::string JobText(int workers, int hosts, int ranks_per_host) {
  return "workers=" + std::to_string(workers) + " hosts=" + std::to_string(hosts) +
         " ranks_per_host=" + std::to_string(ranks_per_host);
}

}  // namespace

AutotuneSettings AutotuneSettings::FromEnvironment() {
  AutotuneSettings settings;
  if (const auto value = GetEnv("CHORUS_AUTOTUNE")) {
    if (*value == "1" || strcasecmp(value->c_str(), "true") == 0) {
      settings.enabled = true;
    } else if (*value != "0" && strcasecmp(value->c_str(), "false") != 0) {
      throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_AUTOTUNE='" + *value +
                                               "' is not 0 or 1 (1 times the candidates on the "
                                               "job's first all-reduces and keeps the fastest)");
    }
  }
  settings.samples = static_cast<int>(GetEnvInteger("CHORUS_AUTOTUNE_SAMPLES", 5, 1, 1000));
  settings.candidates_per_size =
      static_cast<int>(GetEnvInteger("CHORUS_AUTOTUNE_CANDIDATES", 3, 1, 64));
  if (const auto path = GetEnv("CHORUS_TUNING_CACHE")) settings.cache_path = *path;
  return settings;
}

SizeBand BandOf(uint64_t bytes) {
  constexpr uint64_t kFirst = 4096;
  if (bytes < kFirst) return {0, kFirst};
  uint64_t lo = kFirst;
  while (lo < (uint64_t{16} << 30) && bytes >= lo * 4) lo *= 4;
  return {lo, lo >= (uint64_t{16} << 30) ? UINT64_MAX : lo * 4};
}

std::string DescribeBand(const SizeBand& band) {
  return RuleBytesText(band.lo) + "-" + RuleBytesText(band.hi);
}

std::string BandDecision::Describe() const {
  std::string text = "all_reduce " + DescribeBand(band) + ":";
  for (size_t i = 0; i < times_us.size(); ++i) {
    text += (i == 0 ? " " : ", ") + times_us[i].first + " " +
            FormatMicroseconds(times_us[i].second) + " us";
  }
  return text + " -> " + winner;
}

size_t FastestCandidate(const std::vector<double>& times_us, size_t incumbent) {
  size_t best = 0;
  for (size_t i = 1; i < times_us.size(); ++i) {
    if (times_us[i] < times_us[best]) best = i;
  }
  if (incumbent < times_us.size() && best != incumbent &&
      times_us[best] > times_us[incumbent] * (1 - kAutotuneMargin)) {
    return incumbent;
  }
  return best;
}

double MedianOf(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

std::string TuningCacheKey::Fingerprint() const {
  const std::string text = std::to_string(workers) + "|" + std::to_string(hosts) + "|" +
                           std::to_string(ranks_per_host) + "|" + chorus_version + "|" + candidates;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, Fnv1a64(text));
  return hex;
}

std::string WriteTuningCache(const TuningCacheKey& key,
                             const std::vector<BandDecision>& decisions) {
  std::ostringstream out;
  out << kMagic << "\n";
  out << "# chorus tuning cache (CHORUS_TUNING_CACHE), written by autotuning (CHORUS_AUTOTUNE=1).\n"
      << "# It holds the fastest collective per all-reduce size band, as timed on this job's own\n"
      << "# all-reduces; a job of another shape, chorus version or plugin set ignores it and "
         "tunes\n"
      << "# again. As CHORUS_TUNING_FILE it applies without autotuning.\n";
  out << "#! chorus " << key.chorus_version << "\n";
  out << "#! job " << JobText(key.workers, key.hosts, key.ranks_per_host) << "\n";
  out << "#! candidates " << key.candidates << "\n";
  out << "#! fingerprint " << key.Fingerprint() << "\n";
  std::vector<AlgorithmRule> rules;
  for (const BandDecision& d : decisions) {
    out << "#! band " << d.band.lo << " " << d.band.hi << " " << d.winner;
    for (const auto& [name, us] : d.times_us) out << " " << name << "=" << us;
    out << "\n";
    rules.push_back({CHORUS_OP_ALL_REDUCE, d.band.lo, d.band.hi, d.winner});
  }
  std::sort(rules.begin(), rules.end(), [](const AlgorithmRule& a, const AlgorithmRule& b) {
    return a.min_bytes < b.min_bytes;
  });
  out << "[workers=" << key.workers << " hosts=" << key.hosts << "]\n";
  out << DescribeRules(rules) << "\n";
  out << kEnd << "\n";
  return out.str();
}

namespace {

// What a cache's text says, unchecked: its '#!' fields and band lines. `malformed` names the
// first line that is not what WriteTuningCache writes.
struct CacheFields {
  bool magic = false;  // the first line is kMagic
  bool ended = false;  // the kEnd line is there
  std::string version, job, candidates, fingerprint;
  std::vector<BandDecision> decisions;
  std::string malformed;
};

CacheFields ReadCacheFields(const std::string& text) {
  CacheFields fields;
  std::istringstream lines(text);
  std::string line;
  fields.magic = std::getline(lines, line) && Trim(line) == kMagic;
  while (std::getline(lines, line)) {
    line = Trim(line);
    if (line == kEnd) {
      fields.ended = true;
      continue;
    }
    if (line.rfind("#! ", 0) != 0) continue;
    std::istringstream words(line.substr(3));
    std::string field;
    words >> field;
    std::string rest;
    std::getline(words, rest);
    rest = Trim(rest);
    if (field == "chorus") {
      fields.version = rest;
    } else if (field == "job") {
      fields.job = rest;
    } else if (field == "candidates") {
      fields.candidates = rest;
    } else if (field == "fingerprint") {
      fields.fingerprint = rest;
    } else if (field == "band" && fields.malformed.empty()) {
      std::istringstream band(rest);
      BandDecision d;
      if (!(band >> d.band.lo >> d.band.hi >> d.winner) || d.band.lo >= d.band.hi ||
          BandOf(d.band.lo).lo != d.band.lo || BandOf(d.band.lo).hi != d.band.hi) {
        fields.malformed = "a malformed band line '" + line + "'";
        continue;
      }
      for (std::string figure; band >> figure;) {
        const auto equals = figure.find('=');
        try {
          d.times_us.emplace_back(figure.substr(0, equals), std::stod(figure.substr(equals + 1)));
        } catch (const std::exception&) {
          fields.malformed = "a malformed figure '" + figure + "'";
        }
      }
      fields.decisions.push_back(std::move(d));
    }
  }
  return fields;
}

}  // namespace

TuningCacheRead ParseTuningCache(const std::string& text, const std::string& path,
                                 const TuningCacheKey& key) {
  const CacheFields fields = ReadCacheFields(text);
  const auto problem = [&](const std::string& what) {
    return TuningCacheRead{{}, "the tuning cache " + path + " (CHORUS_TUNING_CACHE) " + what};
  };
  if (!fields.magic) {
    return problem("is not a chorus tuning cache (its first line is not '" + std::string(kMagic) +
                   "'); it is ignored and will be replaced by this job's decisions");
  }
  if (!fields.malformed.empty()) return problem("has " + fields.malformed + "; it is ignored");
  if (!fields.ended) {
    return problem("is cut short (no '" + std::string(kEnd) +
                   "' line: a copy or write that did not finish); it is ignored and will be "
                   "replaced");
  }
  if (fields.version != key.chorus_version) {
    return problem("was written by chorus " + fields.version + ", this is chorus " +
                   key.chorus_version + "; it is ignored and will be replaced");
  }
  const std::string my_job = JobText(key.workers, key.hosts, key.ranks_per_host);
  if (fields.job != my_job) {
    return problem("is for a job of " + fields.job + ", this job is " + my_job +
                   "; it is ignored and will be replaced (give each job shape its own "
                   "CHORUS_TUNING_CACHE)");
  }
  if (fields.fingerprint != key.Fingerprint()) {
    return problem("was tuned among other candidates or plugin versions than this job's (" +
                   key.candidates + "); it is ignored and will be replaced");
  }
  return {fields.decisions, ""};
}

TuningCacheRead ReadTuningCache(const std::string& path, const TuningCacheKey& key) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return {};
    return {{},
            "the tuning cache " + path + " (CHORUS_TUNING_CACHE) cannot be read: " +
                std::strerror(errno) + "; autotuning starts afresh"};
  }
  if (!S_ISREG(info.st_mode)) {
    return {{},
            "the tuning cache " + path +
                " (CHORUS_TUNING_CACHE) is not a regular file; point the variable at a file",
            true};
  }
  if (info.st_uid != geteuid()) {
    return {{},
            "the tuning cache " + path + " (CHORUS_TUNING_CACHE) belongs to " +
                UserName(info.st_uid) + ", not to " + UserName(geteuid()) +
                ": it is not used (a cache another user can write could steer this job's "
                "collectives); give the job a cache of its own",
            true};
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return {{},
            "the tuning cache " + path +
                " (CHORUS_TUNING_CACHE) may be written by other users (mode " +
                [&] {
                  char mode[8];
                  std::snprintf(mode, sizeof mode, "%03o", info.st_mode & 0777);
                  return std::string(mode);
                }() +
                "): it is not used; chmod go-w it, or give the job a cache of its own",
            true};
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) {
    return {{},
            "the tuning cache " + path +
                " (CHORUS_TUNING_CACHE) cannot be read; autotuning "
                "starts afresh"};
  }
  return ParseTuningCache(text.str(), path, key);
}

void ReplaceFileAtomically(const std::string& path, const std::string& text) {
  static std::atomic<unsigned> counter{0};
  const std::string temporary =
      path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(CHORUS_UNAVAILABLE, "cannot write the tuning cache " + path + " (" + temporary +
                                        ": " + std::strerror(errno) +
                                        "); point CHORUS_TUNING_CACHE at a writable folder");
  }
  size_t written = 0;
  bool ok = true;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    written += static_cast<size_t>(n);
  }
  const int saved = errno;
  ok = ok && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    unlink(temporary.c_str());
    throw Error(CHORUS_UNAVAILABLE, "cannot write the tuning cache " + path + ": " + why);
  }
}

std::string DescribeTuningCacheFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot be read (" + std::strerror(errno) + ")\n";
  std::ostringstream text;
  text << in.rdbuf();
  const CacheFields fields = ReadCacheFields(text.str());
  if (!fields.magic) return path + ": not a chorus tuning cache\n";
  std::string out = path + ": chorus tuning cache\n  chorus " + fields.version +
                    "\n  job: " + fields.job + "\n  candidates: " + fields.candidates + "\n";
  for (const auto& decision : fields.decisions) out += "  " + decision.Describe() + "\n";
  // Whether this user's jobs would use it, read as they would read it, for the key it names.
  TuningCacheKey key;
  std::sscanf(fields.job.c_str(), "workers=%d hosts=%d ranks_per_host=%d", &key.workers, &key.hosts,
              &key.ranks_per_host);
  key.chorus_version = fields.version;
  key.candidates = fields.candidates;
  const TuningCacheRead read = ReadTuningCache(path, key);
  out += read.problem.empty() ? "  usable by this user's jobs of that shape and plugin set\n"
                              : "  not used: " + read.problem + "\n";
  return out;
}

}  // namespace chorus::internal
