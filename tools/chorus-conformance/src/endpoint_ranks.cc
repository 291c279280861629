#include "endpoint_ranks.h"

#include <chorus/base/error.h>

namespace chorus::conformance::internal {
namespace {

// What a create that failed with `status` means: a skip for a "not here" answer (a failure under
// --require: the plugin provides the transport), else a failure.
std::string CreateFailure(const Suite& suite, const chorus_transport_api& api, chorus_status status,
                          const std::string& error) {
  if (IsNotHere(status)) {
    return NotHereOnRank(suite, status, true, std::string("create of transport '") + api.name + "'",
                         error);
  }
  return error + "(create must succeed on every rank given a valid rank, size and store)";
}

TransportConfig Config(const Suite& suite) {
  TransportConfig config;
  config.timeout_ms = suite.timeout_ms();
  return config;
}

}  // namespace

RanksOutcome RunEndpointRanks(const Suite& suite, const std::shared_ptr<PluginLibrary>& plugin,
                              const chorus_transport_api& api, int size, const EndpointBody& body) {
  const std::string prefix = NextGroupPrefix();
  if (suite.job_mode()) {
    return RunKitRanks(suite, size, [&](int id) -> std::string {
      const std::shared_ptr<KvStore>& job_store = suite.options().job_store;
      CKvStore store(WithPrefix(job_store, prefix));
      const std::shared_ptr<KvStore> sync = WithPrefix(job_store, prefix + "sync/");
      TransportConfig config = Config(suite);
      config.rank = id;
      config.size = size;
      config.store = store.get();
      std::unique_ptr<TransportEndpoint> endpoint;
      try {
        endpoint = TransportEndpoint::Create(plugin, api, config);
      } catch (const Error& e) {
        return CreateFailure(suite, api, e.status(), e.what());
      }
      EndpointRank rank;
      rank.rank = id;
      rank.size = size;
      rank.timeout_ms = suite.timeout_ms();
      rank.endpoint = endpoint.get();
      rank.sync = sync.get();
      rank.destroy = [&] {
        endpoint.reset();
        rank.endpoint = nullptr;
      };
      return body(rank);
    });
  }
  EndpointGroup group(plugin, api, size, Config(suite), prefix);
  const std::shared_ptr<KvStore> sync = WithPrefix(group.job().shared(), "sync/");
  const bool created = group.CreateError().empty();
  return RunKitRanks(suite, size, [&](int id) -> std::string {
    if (group.endpoint(id) == nullptr) {
      return CreateFailure(suite, api, group.create_status(id), group.CreateError());
    }
    if (!created) return "";  // without every rank the check cannot run; the others report why
    EndpointRank rank;
    rank.rank = id;
    rank.size = size;
    rank.timeout_ms = suite.timeout_ms();
    rank.endpoint = group.endpoint(id);
    rank.sync = sync.get();
    rank.destroy = [&] {
      group.Destroy(id);
      rank.endpoint = nullptr;
    };
    return body(rank);
  });
}

}  // namespace chorus::conformance::internal
