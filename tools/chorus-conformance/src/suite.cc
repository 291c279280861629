#include "suite.h"

#include <chorus/base/error.h>
#include <chorus/runtime/loader.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>

namespace chorus::conformance::internal {
namespace {

// Every test is this fixture around a lambda, so one suite may mix tests of any body.
class FunctionTest : public testing::Test {
 public:
  explicit FunctionTest(std::function<void()> body) : body_(std::move(body)) {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

}  // namespace

Suite::Suite(std::shared_ptr<PluginLibrary> plugin, KitOptions options)
    : plugin_(std::move(plugin)), options_(std::move(options)) {
  if (plugin_->builtin()) {
    // A builtin table is the core's own: its copy is the table.
    raw_table_ = &plugin_->table();
  } else {
    // The library is loaded already; RTLD_NOLOAD only takes another reference to it.
    dl_handle_ = dlopen(plugin_->path().c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    void* entry = dl_handle_ ? dlsym(dl_handle_, CHORUS_PLUGIN_ENTRY_SYMBOL) : nullptr;
    if (entry == nullptr) {
      const char* detail = dlerror();
      raw_table_error_ = std::string("cannot find ") + CHORUS_PLUGIN_ENTRY_SYMBOL + " in " +
                         plugin_->path() + ": " + (detail ? detail : "unknown dlopen error");
    } else {
      // plugin.h: the entry point is cheap and free of side effects, so calling it again is
      // allowed; it returns the table that lives as long as the library.
      raw_table_ = reinterpret_cast<chorus_plugin_get_fn>(entry)(CoreHost());
      if (raw_table_ == nullptr) {
        raw_table_error_ = std::string(CHORUS_PLUGIN_ENTRY_SYMBOL) +
                           "() returned NULL on a second call after returning a table on the "
                           "first: the entry point must be free of side effects";
      }
    }
  }
  if (plugin_->builtin() && plugin_->name() == kBuiltinPluginName) {
    core_ = plugin_;
  } else {
    registry_ = std::make_unique<Registry>(LoaderOptions{{}, std::string("none")});
    core_ = registry_->FindPlugin(kBuiltinPluginName);
  }
}

Suite::~Suite() {
  if (dl_handle_ != nullptr) dlclose(dl_handle_);
}

std::shared_ptr<DeviceEnumerator> Suite::CpuDevices(uint32_t count) const {
  return DeviceEnumerator::Create(core_, {{"count", std::to_string(count)}});
}

std::string Suite::EnumeratorTestName(const std::string& name, size_t index) const {
  const auto& all = plugin_->device_enumerators();
  return all.size() > 1 ? name + "/" + all[index]->platform : name;
}

std::shared_ptr<DeviceEnumerator> Suite::PluginDevices(size_t enumerator) const {
  try {
    return DeviceEnumerator::Create(plugin_, *plugin_->device_enumerators().at(enumerator),
                                    options_.enumerator_options);
  } catch (const Error& e) {
    ADD_FAILURE() << "creating a context of the plugin's device enumerator failed: " << e.what()
                  << "; create must return CHORUS_OK for these options (a machine without "
                     "devices gives a context of 0 devices, not an error)";
  }
  return nullptr;
}

std::string Suite::LastError() const {
  const char* message = plugin_->table().last_error();
  return message ? message : "(NULL)";
}

void AddTest(const std::string& suite, const std::string& name, std::function<void()> body,
             const char* file, int line) {
  testing::RegisterTest(
      suite.c_str(), name.c_str(), nullptr, nullptr, file, line,
      [body = std::move(body)]() -> FunctionTest* { return new FunctionTest(body); });
}

std::string NextGroupPrefix() {
  static std::atomic<int> group{0};
  return "conformance/" + std::to_string(group++) + "/";
}

namespace {

std::string NotHereReason(const Suite& suite, chorus_status status, bool declared,
                          const std::string& what, const std::string& message) {
  return what + " answered " + StatusName(status) + " (" + message + "): " +
         (declared ? "the table declares it; --require would fail here: implement it or stop "
                     "declaring it"
                   : "the table does not declare it") +
         (suite.require() && !declared ? ", so --require does not ask for it" : "");
}

}  // namespace

std::string NotHereOnRank(const Suite& suite, chorus_status status, bool declared,
                          const std::string& what, const std::string& message) {
  if (suite.require() && declared) {
    return what + " answered " + StatusName(status) + " (" + message +
           "), but the table declares it, and --require asks for everything declared; implement "
           "it, or stop declaring it (capabilities ops and memory, or the table entry)";
  }
  throw NotHere(NotHereReason(suite, status, declared, what, message));
}

void FailOrSkipNotHere(const Suite& suite, chorus_status status, bool declared,
                       const std::string& what, const std::string& message) {
  std::string failure;
  try {
    failure = NotHereOnRank(suite, status, declared, what, message);
  } catch (const NotHere& skip) {
    GTEST_SKIP() << skip.what();
  }
  ADD_FAILURE() << failure;
}

RanksOutcome RunKitRanks(const Suite& suite, int size,
                         const std::function<std::string(int rank)>& body) {
  std::mutex mutex;
  RanksOutcome outcome;
  auto guarded = [&](int rank) -> std::string {
    try {
      return body(rank);
    } catch (const NotHere& skip) {
      std::lock_guard<std::mutex> lock(mutex);
      if (outcome.skipped.empty()) outcome.skipped = skip.what();
      return "";
    }
  };
  if (!suite.job_mode()) {
    outcome.failures = RunRankThreads(size, guarded).Joined();
    return outcome;
  }
  const int rank = suite.options().job_rank;
  std::string failure;
  try {
    failure = guarded(rank);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty()) outcome.failures = "rank " + std::to_string(rank) + ": " + failure + "\n";
  return outcome;
}

bool Report(const RanksOutcome& outcome, const std::string& context) {
  if (!outcome.failures.empty()) {
    ADD_FAILURE() << context << ":\n" << outcome.failures;
    return true;
  }
  if (!outcome.skipped.empty()) {
    [&] { GTEST_SKIP() << context << ": " << outcome.skipped; }();
    return true;
  }
  return false;
}

void ExpectStatus(const Suite& suite, chorus_status status,
                  const std::vector<chorus_status>& allowed, const std::string& what) {
  const std::string message = suite.LastError();
  std::ostringstream want;
  for (chorus_status s : allowed) want << (want.tellp() > 0 ? " or " : "") << StatusName(s);
  if (std::find(allowed.begin(), allowed.end(), status) == allowed.end()) {
    ADD_FAILURE() << what << ": returned " << StatusName(status) << ", expected " << want.str()
                  << (status == CHORUS_OK ? "" : " (last_error: \"" + message + "\")")
                  << "; check this argument first and return " << want.str()
                  << " with a last_error() message";
    return;
  }
  if (status != CHORUS_OK && (message.empty() || message == "(NULL)")) {
    ADD_FAILURE() << what << ": returned " << StatusName(status)
                  << " but last_error() gives no message; set one (thread-local, naming the bad "
                     "argument) before returning any status other than CHORUS_OK";
  }
}

}  // namespace chorus::conformance::internal
