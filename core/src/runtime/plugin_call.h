// Calls into a plugin that the core makes through function pointers, with what the C ABI cannot
// promise checked on the core's side: a C++ exception that a plugin lets escape across the C
// boundary becomes an error naming the plugin and the call (never a bare "boom"), and a call
// that may load libraries (a create) leaves the process's signal dispositions as it found them.
#ifndef CHORUS_RUNTIME_PLUGIN_CALL_H_
#define CHORUS_RUNTIME_PLUGIN_CALL_H_

#include <chorus/base/error.h>
#include <chorus/runtime/plugin_library.h>

#include <chrono>
#include <exception>
#include <string>

#include "base/logging.h"
#include "base/signal_dispositions.h"
#include "base/watchdog.h"

namespace chorus::internal {

// "plugin gloo (/path/libchorus-gloo.so)".
std::string PluginWords(const PluginLibrary& library);

// "plugin gloo (/path/libchorus-gloo.so): its all_reduce over gloo threw a C++ exception across
// the C ABI: boom. ..." from `call` = "plugin gloo (...): its all_reduce over gloo" (`what`
// NULL: an exception that is no std::exception).
std::string ThrewAcrossTheAbi(const std::string& call, const char* what);

// Runs `run` (a call into a plugin), turning an exception that escaped the plugin into an Error
// of CHORUS_INTERNAL whose message is ThrewAcrossTheAbi(describe(), ...). `describe` runs only
// then, so the usual path builds no text.
template <typename Describe, typename Call>
auto CallPlugin(Describe&& describe, Call&& run) -> decltype(run()) {
  try {
    return run();
  } catch (const std::exception& e) {
    throw Error(CHORUS_INTERNAL, ThrewAcrossTheAbi(describe(), e.what()));
  } catch (...) {
    throw Error(CHORUS_INTERNAL, ThrewAcrossTheAbi(describe(), nullptr));
  }
}

// Logs that `call` ("plugin x (path): create of ...") changed the handling of `signals`, which
// were put back.
void ReportSignalsRestored(const std::string& call, const std::string& signals);

// Runs `call` and puts back any signal disposition it changed (base/signal_dispositions.h).
template <typename Call>
auto WithSignalsKept(const std::string& call, Call&& run) -> decltype(run()) {
  const SignalDispositions before = SignalDispositions::Take();
  struct Restore {
    const SignalDispositions& before;
    const std::string& call;
    ~Restore() {
      const std::string restored = before.RestoreChanged();
      if (!restored.empty()) ReportSignalsRestored(call, restored);
    }
  } restore{before, call};
  return run();
}

// A plugin's create (`run`, bound by the plugin to `timeout`), described by `what` ("plugin gloo
// (path): create of collective 'gloo' on worker 1"): under the watchdog (a create that never
// returns ends the process naming it: there is nothing to abort yet), with the process's signal
// handling kept (a create may load libraries), and an exception across the ABI named.
template <typename Create>
chorus_status CreateInPlugin(const std::string& what, std::chrono::milliseconds timeout,
                             Create&& run) {
  return CallPlugin([&] { return what; },
                    [&] {
                      auto watch = Watch(
                          WatchdogLimitFor(timeout), kWatchdogGrace, [&] { return what; },
                          [](const std::string& message) { Log().error("{}", message); });
                      return WithSignalsKept(what, run);
                    });
}

}  // namespace chorus::internal

#endif  // CHORUS_RUNTIME_PLUGIN_CALL_H_
