#include "collective/plan_check.h"

#include <chorus/base/error.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <sstream>

#include "base/text.h"

namespace chorus::internal {
namespace {

// Serialized form: each field as sdk::PutField writes it, so that any value round-trips.
void Put(std::string& out, const std::string& field) { sdk::PutField(out, field); }

class Reader {
 public:
  explicit Reader(const std::string& text) : fields_(text) {}
  std::string Next() {
    std::optional<std::string> field = fields_.Next();
    if (!field) Corrupt();
    return std::move(*field);
  }
  int NextInt() {
    const std::string field = Next();
    try {
      return std::stoi(field);
    } catch (const std::exception&) {
      Corrupt();
    }
  }

 private:
  [[noreturn]] void Corrupt() const {
    throw Error(CHORUS_INTERNAL,
                "the choices another rank published for the communicator are not in the form "
                "this rank writes (is every worker running the same chorus build?)");
  }
  sdk::FieldReader fields_;
};

std::string SecondsText(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

std::string Quoted(const std::string& name) { return "'" + name + "'"; }

std::string CollectiveNames(const PlanChoices& c) {
  std::string out;
  for (const auto& collective : c.collectives) out += (out.empty() ? "" : ", ") + collective.name;
  return out;
}

std::string CollectivesWithPlugins(const PlanChoices& c) {
  std::string out;
  for (const auto& collective : c.collectives) {
    out += (out.empty() ? "" : ", ") + collective.name + " (" + collective.plugin + ")";
  }
  return out;
}

// What makes the primary collective differ, from the two reasons: the setting either names.
std::string FixForSources(const std::string& a, const std::string& b) {
  std::vector<std::string> fixes;
  const auto add = [&](const std::string& fix) {
    if (std::find(fixes.begin(), fixes.end(), fix) == fixes.end()) fixes.push_back(fix);
  };
  for (const std::string* source : {&a, &b}) {
    if (source->starts_with("CHORUS_COMMUNICATION")) {
      add("give every worker the same CHORUS_COMMUNICATION");
    } else if (source->starts_with("CommunicationOptions")) {
      add("construct every worker's strategy with the same "
          "CommunicationOptions.implementation");
    } else if (source->starts_with("named")) {
      add("create every worker's communicator with the same collective name");
    }
  }
  if (fixes.empty()) {
    // Both chose by scores (or the same tuning file): they see different plugins.
    add("give every worker the same plugins (CHORUS_PLUGIN_PATH, CHORUS_PLUGINS) and the same "
        "CHORUS_TUNING_FILE");
  }
  std::string out;
  for (const auto& fix : fixes) out += (out.empty() ? "" : ", and ") + fix;
  return out;
}

}  // namespace

std::string PlanChoices::Serialize() const {
  std::string out;
  Put(out, std::to_string(size));
  Put(out, shape);
  Put(out, request);
  Put(out, source);
  Put(out, fixed);
  Put(out, algorithm);
  Put(out, tuning);
  Put(out, tuning_from);
  Put(out, autotune);
  Put(out, error);
  Put(out, std::to_string(collectives.size()));
  for (const auto& c : collectives) {
    Put(out, c.name);
    Put(out, c.plugin);
    Put(out, c.options);
  }
  return out;
}

PlanChoices PlanChoices::Parse(const std::string& text) {
  Reader in(text);
  PlanChoices c;
  c.size = in.NextInt();
  c.shape = in.Next();
  c.request = in.Next();
  c.source = in.Next();
  c.fixed = in.Next();
  c.algorithm = in.Next();
  c.tuning = in.Next();
  c.tuning_from = in.Next();
  c.autotune = in.Next();
  c.error = in.Next();
  const int count = in.NextInt();
  for (int i = 0; i < count; ++i) {
    Collective collective;
    collective.name = in.Next();
    collective.plugin = in.Next();
    collective.options = in.Next();
    c.collectives.push_back(std::move(collective));
  }
  return c;
}

std::string ShortSource(const std::string& source) { return source.substr(0, source.find(": ")); }

std::string PlanMismatch(const PlanChoices& ref, const std::string& ref_task,
                         const PlanChoices& theirs, const std::string& task) {
  const std::string but = " but " + ref_task + " ";
  if (!theirs.error.empty()) {
    return task + " cannot create what " + ref_task + " creates (" + CollectiveNames(ref) +
           "): " + theirs.error;
  }
  if (!ref.error.empty()) return ref_task + " cannot create its collectives: " + ref.error;
  if (theirs.size != ref.size) {
    return task + " counts " + std::to_string(theirs.size) + " workers" + but + "counts " +
           std::to_string(ref.size) +
           "; give every worker the same cluster (TF_CONFIG, or the launcher's variables)";
  }
  if (theirs.shape != ref.shape) {
    return task + " sees a job of " + theirs.shape + but + "sees " + ref.shape +
           "; every worker must describe the job alike (CHORUS_HOST_ID)";
  }
  const std::string primary = theirs.collectives.empty() ? "" : theirs.collectives[0].name;
  const std::string ref_primary = ref.collectives.empty() ? "" : ref.collectives[0].name;
  if (primary != ref_primary) {
    std::string message = task + " chose collective " + Quoted(primary) + " (" + theirs.source +
                          ")" + but + "chose " + Quoted(ref_primary) + " (" + ref.source + "); " +
                          FixForSources(theirs.source, ref.source);
    if (theirs.source == ref.source) {
      message += " (" + task + " would create " + CollectivesWithPlugins(theirs) + "; " + ref_task +
                 " " + CollectivesWithPlugins(ref) + ")";
    }
    return message;
  }
  if (theirs.request != ref.request) {
    return task + " requests " + theirs.request + " (" + theirs.source + ")" + but + "requests " +
           ref.request + " (" + ref.source + "); " + FixForSources(theirs.source, ref.source);
  }
  if (theirs.algorithm != ref.algorithm) {
    const auto rules = [](const PlanChoices& c) {
      return c.algorithm.empty() ? std::string("no CHORUS_ALGORITHM")
                                 : "CHORUS_ALGORITHM=" + c.algorithm;
    };
    return task + " has " + rules(theirs) + but + "has " + rules(ref) +
           "; give every worker the same CHORUS_ALGORITHM";
  }
  if (theirs.tuning != ref.tuning) {
    const auto tuning = [](const PlanChoices& c) {
      return c.tuning.empty() ? std::string("no tuning file")
                              : c.tuning_from + " (" + c.tuning + ")";
    };
    return task + " routes by " + tuning(theirs) + but + "by " + tuning(ref) +
           "; give every worker the same CHORUS_TUNING_FILE, with the same contents";
  }
  if (theirs.autotune != ref.autotune) {
    const auto autotune = [](const PlanChoices& c) {
      return c.autotune.empty() ? std::string("does not autotune")
                                : "autotunes among " + c.autotune;
    };
    return task + " " + autotune(theirs) + but + autotune(ref) +
           "; give every worker the same CHORUS_AUTOTUNE, CHORUS_AUTOTUNE_SAMPLES and "
           "CHORUS_AUTOTUNE_CANDIDATES, and CHORUS_TUNING_CACHE to all or none";
  }
  if (CollectiveNames(theirs) != CollectiveNames(ref)) {
    return task + " would create " + CollectivesWithPlugins(theirs) + but + "would create " +
           CollectivesWithPlugins(ref) +
           "; give every worker the same plugins (CHORUS_PLUGIN_PATH, CHORUS_PLUGINS)";
  }
  for (size_t i = 0; i < ref.collectives.size(); ++i) {
    const auto& mine = theirs.collectives[i];
    const auto& other = ref.collectives[i];
    if (mine.plugin != other.plugin) {
      return task + " serves collective " + Quoted(mine.name) + " from plugin " + mine.plugin +
             but + "from " + other.plugin +
             "; install the same build of the plugin for every worker (CHORUS_PLUGIN_PATH)";
    }
    if (mine.options != other.options) {
      return task + " hands collective " + Quoted(mine.name) + " " +
             (mine.options.empty() ? "no options" : "the options " + mine.options) + but +
             (other.options.empty() ? "none" : "hands it " + other.options) +
             "; give every worker the same collective options (CommunicatorConfig.options)";
    }
  }
  // Which collective runs what no rule routes matters only where there is a choice.
  if (theirs.fixed != ref.fixed && ref.collectives.size() > 1) {
    const auto runs = [](const PlanChoices& c) {
      return c.fixed.empty() ? std::string("routes by scores")
                             : "runs on " + Quoted(c.fixed) + " everything no rule routes";
    };
    return task + " " + runs(theirs) + " (" + theirs.source + ")" + but + runs(ref) + " (" +
           ref.source + "); " + FixForSources(theirs.source, ref.source);
  }
  return "";
}

namespace {

// The verdict rank 0 publishes: "ok", or the status and message every rank throws.
constexpr char kAgreed[] = "ok";

std::string EncodeFailure(chorus_status status, const std::string& message) {
  std::string out;
  Put(out, std::to_string(static_cast<int>(status)));
  Put(out, message);
  return out;
}

std::string Missing(const PlanExchange& x, int from) {
  std::vector<std::string> missing;
  for (int r = from; r < x.size; ++r) {
    if (r != x.rank && !x.store->Check(x.prefix + std::to_string(r))) {
      missing.push_back(x.task_name(r));
    }
  }
  return ListOf(missing);
}

std::string NotJoined(const PlanExchange& x, const std::string& missing) {
  return x.what + ": " + missing + " did not join within " + SecondsText(x.timeout_seconds) +
         " s (is every worker started, with the same job? CHORUS_TIMEOUT_SECONDS or "
         "CommunicationOptions.timeout_seconds say how long to wait)";
}

void LeaderDecides(const PlanExchange& x, const PlanChoices& mine) {
  const auto deadline = std::chrono::steady_clock::now() + x.timeout;
  const auto publish = [&](const std::string& verdict) {
    x.store->Set(x.prefix + "verdict", ToBytes(verdict));
  };
  if (!mine.error.empty()) {
    publish(EncodeFailure(
        CHORUS_INVALID_ARGUMENT,
        x.what + ": " + x.task_name(0) + " cannot create its collectives: " + mine.error));
    return;
  }
  for (int r = 1; r < x.size; ++r) {
    Bytes theirs;
    try {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      theirs =
          x.store->Get(x.prefix + std::to_string(r), std::max(left, std::chrono::milliseconds(1)));
    } catch (const Error& e) {
      if (e.status() != CHORUS_TIMEOUT) throw;
      const std::string message = NotJoined(x, Missing(x, r));
      publish(EncodeFailure(CHORUS_TIMEOUT, message));  // for the ranks that joined
      throw Error(CHORUS_TIMEOUT, message);
    }
    const std::string mismatch =
        PlanMismatch(mine, x.task_name(0), PlanChoices::Parse(ToString(theirs)), x.task_name(r));
    if (!mismatch.empty()) {
      const std::string message = x.what + ": " + mismatch;
      publish(EncodeFailure(CHORUS_INVALID_ARGUMENT, message));
      throw Error(CHORUS_INVALID_ARGUMENT, message);
    }
  }
  std::string verdict;
  Put(verdict, kAgreed);
  publish(verdict);
}

void FollowerAwaits(const PlanExchange& x, const PlanChoices& mine) {
  if (!mine.error.empty()) return;  // the caller throws its own error; rank 0 tells the rest
  Bytes verdict;
  try {
    verdict = x.store->Get(x.prefix + "verdict", x.timeout);
  } catch (const Error& e) {
    if (e.status() != CHORUS_TIMEOUT) throw;
    const std::string missing = Missing(x, 0);
    if (!missing.empty()) throw Error(CHORUS_TIMEOUT, NotJoined(x, missing));
    throw Error(CHORUS_TIMEOUT, x.what + ": every worker joined, but " + x.task_name(0) +
                                    " did not say within " + SecondsText(x.timeout_seconds) +
                                    " s whether they agree (is it still running?)");
  }
  const std::string text = ToString(verdict);
  Reader in(text);
  const std::string head = in.Next();
  // Rank 0 compared every rank's choices with its own before it agreed.
  if (head == kAgreed) return;
  int status = CHORUS_INTERNAL;
  try {
    status = std::stoi(head);
  } catch (const std::exception&) {
    throw Error(CHORUS_INTERNAL, x.what + ": " + x.task_name(0) +
                                     " published a verdict this rank cannot read (is every "
                                     "worker running the same chorus build?)");
  }
  throw Error(static_cast<chorus_status>(status), in.Next());
}

}  // namespace

void AgreeOnPlan(const PlanExchange& x, const PlanChoices& mine) {
  x.store->Set(x.prefix + std::to_string(x.rank), ToBytes(mine.Serialize()));
  if (x.rank == 0) {
    LeaderDecides(x, mine);
  } else {
    FollowerAwaits(x, mine);
  }
}

}  // namespace chorus::internal
