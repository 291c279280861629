#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/collective/transport_endpoint.h>

#include <vector>

#include "collective/plugin_job.h"
#include "runtime/collective_p2p.h"
#include "runtime/raw_options.h"

namespace chorus {

TransportEndpoint::TransportEndpoint(std::shared_ptr<PluginLibrary> plugin,
                                     const chorus_transport_api& api)
    : plugin_(std::move(plugin)), api_(api) {}

std::unique_ptr<TransportEndpoint> TransportEndpoint::Create(std::shared_ptr<PluginLibrary> plugin,
                                                             const chorus_transport_api& api,
                                                             const TransportConfig& config) {
  if (plugin == nullptr) throw Error(CHORUS_INVALID_ARGUMENT, "transport endpoint: no plugin");
  if (api.create == nullptr || api.destroy == nullptr || api.isend == nullptr ||
      api.irecv == nullptr || api.abort == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, std::string("transport '") + api.name + "' of plugin " +
                                        plugin->name() +
                                        " lacks create, destroy, isend, irecv or abort");
  }
  std::unique_ptr<TransportEndpoint> self(new TransportEndpoint(plugin, api));
  self->rank_ = config.rank;
  self->size_ = config.size;
  const auto raw = internal::RawOptions(config.options);
  chorus_transport_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = config.rank;
  args.size = config.size;
  args.store = config.store;
  args.timeout_ms = config.timeout_ms;
  args.options = raw.data();
  args.num_options = raw.size();
  args.address = config.address.empty() ? nullptr : config.address.c_str();
  args.host_id = config.host_id.empty() ? nullptr : config.host_id.c_str();
  args.context = api.context;
  if (config.store != nullptr) {
    const std::string who = std::string("transport '") + api.name + "' endpoint";
    const std::string job_id = internal::JobIdOf(*config.store, config.timeout_ms, who);
    self->job_ = std::make_shared<internal::PluginJob>(
        job_id, config.rank, config.size, config.host_id.empty() ? HostIdentity() : config.host_id,
        config.store, config.timeout_ms,
        internal::ObjectIdOf(*config.store, config.rank, job_id, config.timeout_ms, who));
    args.job = &self->job_->job;
    args.object_id = self->job_->object_id.c_str();
  }
  const chorus_status status = api.create(&args, &self->handle_);
  if (status != CHORUS_OK) {
    self->handle_ = nullptr;
    throw Error(status, std::string("transport '") + api.name + "' (plugin " + plugin->name() +
                            ") could not create the endpoint of rank " +
                            std::to_string(config.rank) + " of " + std::to_string(config.size) +
                            ": " + plugin->LastError());
  }
  self->p2p_ = std::make_unique<internal::CollectiveP2p>(plugin->table(), api, self->handle_,
                                                         config.rank, config.size);
  return self;
}

TransportEndpoint::~TransportEndpoint() {
  p2p_.reset();  // frees what a failed run left
  if (handle_ != nullptr) api_.destroy(handle_);
}

const chorus_p2p* TransportEndpoint::p2p() const { return p2p_->get(); }
bool TransportEndpoint::failed() const { return p2p_->failed(); }
std::string TransportEndpoint::failure_message() const { return p2p_->failure_message(); }
void TransportEndpoint::Abort() { api_.abort(handle_); }

void RunAlgorithm(const PluginLibrary& plugin, const chorus_algorithm_api& algorithm,
                  TransportEndpoint& endpoint, chorus_algorithm_run_args args) {
  if (algorithm.run == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, std::string("algorithm '") + algorithm.name + "' has no run");
  }
  args.struct_size = sizeof(args);
  args.p2p = endpoint.p2p();
  args.context = algorithm.context;
  const chorus_status status = algorithm.run(&args);
  if (status == CHORUS_OK) return;
  std::string message = plugin.LastError();
  if (message.empty() && endpoint.failed()) message = endpoint.failure_message();
  throw Error(status, std::string("algorithm '") + algorithm.name + "' over transport '" +
                          endpoint.api().name + "': " + message);
}

}  // namespace chorus
