// TransportEndpoint: one rank's endpoint of a transport (plugin.h interface 5) of any plugin, the
// core's tcp included, and the chorus_p2p over it that an algorithm (interface 4) runs on.
//
// p2p() is built for collectives: the first failure of any operation (a lost peer, a wait that
// timed out, a size mismatch, an abort) aborts the whole endpoint, so the neighbours fail in turn
// instead of waiting out their time-out, and every other request of the run completes at once.
// The endpoint cannot be used after a failure. The transport's own table stays reachable
// (api(), handle()) for tests of the transport itself.
#ifndef CHORUS_COLLECTIVE_TRANSPORT_ENDPOINT_H_
#define CHORUS_COLLECTIVE_TRANSPORT_ENDPOINT_H_

#include <chorus/plugin.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/plugin_library.h>

#include <cstdint>
#include <memory>
#include <string>

namespace chorus {

namespace internal {
class CollectiveP2p;
struct PluginJob;
}  // namespace internal

struct TransportConfig {
  int rank = 0;
  int size = 1;
  const chorus_kv_store* store = nullptr;  // borrowed; must outlive the endpoint
  int64_t timeout_ms = 300000;
  Options options;      // handed to the transport's create
  std::string address;  // where the other ranks reach this one ("": the transport's default)
  std::string host_id;  // the machine it runs on ("": unknown)
};

class TransportEndpoint {
 public:
  // Creates rank config.rank's endpoint of transport `api` of `plugin` (a collective call: every
  // rank creates its own). Throws Error with the plugin's message when create fails.
  static std::unique_ptr<TransportEndpoint> Create(std::shared_ptr<PluginLibrary> plugin,
                                                   const chorus_transport_api& api,
                                                   const TransportConfig& config);
  ~TransportEndpoint();
  TransportEndpoint(const TransportEndpoint&) = delete;
  TransportEndpoint& operator=(const TransportEndpoint&) = delete;

  const PluginLibrary& library() const { return *plugin_; }
  const chorus_transport_api& api() const { return api_; }
  chorus_transport_endpoint* handle() const { return handle_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The point-to-point operations an algorithm runs over (borrowed; lives as long as this).
  const chorus_p2p* p2p() const;
  // Whether an operation through p2p() failed (the endpoint is then aborted), and its message.
  bool failed() const;
  std::string failure_message() const;
  // Aborts the endpoint: pending and later operations fail. Safe from any thread.
  void Abort();

 private:
  TransportEndpoint(std::shared_ptr<PluginLibrary> plugin, const chorus_transport_api& api);

  std::shared_ptr<PluginLibrary> plugin_;
  const chorus_transport_api& api_;
  chorus_transport_endpoint* handle_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<internal::CollectiveP2p> p2p_;
  std::shared_ptr<internal::PluginJob> job_;  // what create was handed as job and object_id
};

// Runs one collective of `algorithm` (a table of `plugin`) over `endpoint` on the calling thread:
// args.p2p is set to endpoint.p2p(). Throws Error with the algorithm's status and message.
void RunAlgorithm(const PluginLibrary& plugin, const chorus_algorithm_api& algorithm,
                  TransportEndpoint& endpoint, chorus_algorithm_run_args args);

}  // namespace chorus

#endif  // CHORUS_COLLECTIVE_TRANSPORT_ENDPOINT_H_
