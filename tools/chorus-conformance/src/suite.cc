#include "suite.h"

#include <chorus/base/error.h>
#include <chorus/runtime/loader.h>
#include <dlfcn.h>

#include <algorithm>
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

std::shared_ptr<DeviceEnumerator> Suite::PluginDevices() const {
  try {
    return DeviceEnumerator::Create(plugin_, options_.enumerator_options);
  } catch (const Error& e) {
    ADD_FAILURE() << "creating a context of the plugin's device enumerator failed: " << e.what();
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

void ExpectStatus(const Suite& suite, chorus_status status,
                  const std::vector<chorus_status>& allowed, const std::string& what) {
  const std::string message = suite.LastError();
  std::ostringstream want;
  for (chorus_status s : allowed) want << (want.tellp() > 0 ? " or " : "") << StatusName(s);
  if (std::find(allowed.begin(), allowed.end(), status) == allowed.end()) {
    ADD_FAILURE() << what << ": returned " << StatusName(status) << ", expected " << want.str()
                  << (status == CHORUS_OK ? "" : " (last_error: \"" + message + "\")");
    return;
  }
  if (status != CHORUS_OK && (message.empty() || message == "(NULL)")) {
    ADD_FAILURE() << what << ": returned " << StatusName(status)
                  << " but last_error() gives no message; set one for every failure";
  }
}

}  // namespace chorus::conformance::internal
