// Ranks of a job as threads of one process: the harness the conformance kit and chorus's own
// tests run collectives and transports with.
//
//   chorus::conformance::CommunicatorGroup group(plugin, *plugin->collective(), 3);
//   ASSERT_EQ(group.CreateError(), "");
//   const auto failures = chorus::conformance::RunRankThreads(3, [&](int rank) {
//     ... group.comm(rank) ...        // gtest assertions, a returned message, or a throw
//   });
//   EXPECT_EQ(failures.Joined(), "");
//
// Every rank has its own chorus_kv_store over one fresh in-process store, as every process of a
// real job has its own. Communicators and endpoints of a group are created on a thread per rank
// at once (each create waits for the others) and destroyed at once (some plugins barrier in
// destroy). Every wait has a time-out.
#ifndef CHORUS_CONFORMANCE_RANK_THREADS_H_
#define CHORUS_CONFORMANCE_RANK_THREADS_H_

#include <chorus/collective/transport_endpoint.h>
#include <chorus/plugin.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/plugin_library.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace chorus::conformance {

// ---- Threads ---------------------------------------------------------------------------------

// What the ranks of one run reported: "" where a rank passed, else its failure, which names it.
class RankFailures {
 public:
  RankFailures() = default;
  explicit RankFailures(std::vector<std::string> by_rank) : by_rank_(std::move(by_rank)) {}

  int size() const { return static_cast<int>(by_rank_.size()); }
  // Rank `rank`'s failure; "" when it passed.
  const std::string& operator[](int rank) const { return by_rank_.at(static_cast<size_t>(rank)); }
  bool ok() const;
  // Every failure, one per line; "" when every rank passed: EXPECT_EQ(failures.Joined(), "").
  std::string Joined() const;

 private:
  std::vector<std::string> by_rank_;
};

// Runs body(rank) for rank 0..size-1, each on a thread of its own, all at once, and joins them.
// A failure is what a body returns (a std::string, "" for none) or the message of an exception
// it throws, prefixed "rank <r>: ". Gtest assertions in a body count for the calling test.
RankFailures RunRankThreadsReturning(int size, const std::function<std::string(int rank)>& body);

// As RunRankThreadsReturning, for a body that returns void or a std::string.
template <typename Body>
[[nodiscard]] RankFailures RunRankThreads(int size, Body&& body) {
  if constexpr (std::is_void_v<std::invoke_result_t<Body&, int>>) {
    return RunRankThreadsReturning(size, [&body](int rank) -> std::string {
      body(rank);
      return "";
    });
  } else {
    return RunRankThreadsReturning(size, [&body](int rank) -> std::string { return body(rank); });
  }
}

// ---- The rendezvous of a job -----------------------------------------------------------------

// A job of `size` ranks as threads: a fresh in-process store, and a chorus_kv_store per rank
// over WithPrefix(store, prefix). Must outlive every communicator and endpoint handed a store.
class ThreadJob {
 public:
  explicit ThreadJob(int size, const std::string& prefix = "job/");
  ThreadJob(const ThreadJob&) = delete;
  ThreadJob& operator=(const ThreadJob&) = delete;

  int size() const { return static_cast<int>(stores_.size()); }
  // Rank `rank`'s store, for a create call.
  const chorus_kv_store* store(int rank) const;
  // The whole store (no prefix), for a test's own keys: a rank waits here for another.
  const std::shared_ptr<KvStore>& shared() const { return shared_; }

 private:
  std::shared_ptr<KvStore> shared_;
  std::vector<std::unique_ptr<CKvStore>> stores_;
};

// ---- Collectives (interface 3) ---------------------------------------------------------------

// How each rank's communicator is created.
struct CommunicatorSettings {
  CommunicatorSettings() = default;
  explicit CommunicatorSettings(int64_t timeout, Options create_options = {})
      : timeout_ms(timeout), options(std::move(create_options)) {}

  int64_t timeout_ms = 60000;  // the set-up's and every operation's
  Options options;             // handed to create
  // Where the buffers live: host memory when null; else rank r's buffers are on device r of it.
  std::shared_ptr<DeviceEnumerator> devices;
};

// One rank's communicator of a collective table, created on the calling thread (the other ranks
// must create theirs at the same time) and destroyed through the table when this goes. A create
// that fails leaves no communicator; status() and CreateError() say why.
class RankCommunicator {
 public:
  RankCommunicator(std::shared_ptr<PluginLibrary> plugin, const chorus_collective_api& api,
                   const chorus_kv_store* store, int rank, int size,
                   const CommunicatorSettings& settings = {});
  ~RankCommunicator();
  RankCommunicator(const RankCommunicator&) = delete;
  RankCommunicator& operator=(const RankCommunicator&) = delete;

  chorus_communicator* get() const { return comm_; }
  const chorus_collective_api& api() const { return api_; }
  const PluginLibrary& plugin() const { return *plugin_; }
  // create's status, and the plugin's last_error() when it failed.
  chorus_status status() const { return status_; }
  const std::string& last_error() const { return last_error_; }
  // "" when create succeeded, else "rank r of n: create failed with STATUS: message".
  std::string CreateError() const;
  // How long create took.
  double create_seconds() const { return create_seconds_; }
  // Destroys the communicator now (a rank that leaves); get() is then NULL.
  void Destroy();

 private:
  std::shared_ptr<PluginLibrary> plugin_;
  const chorus_collective_api& api_;
  int rank_, size_;
  chorus_communicator* comm_ = nullptr;
  chorus_status status_ = CHORUS_OK;
  std::string last_error_;
  double create_seconds_ = 0;
};

// One communicator per rank of a ThreadJob of `size`, created at once (a thread per rank) and
// destroyed at once.
class CommunicatorGroup {
 public:
  CommunicatorGroup(std::shared_ptr<PluginLibrary> plugin, const chorus_collective_api& api,
                    int size, const CommunicatorSettings& settings = {},
                    const std::string& store_prefix = "job/");
  ~CommunicatorGroup();
  CommunicatorGroup(const CommunicatorGroup&) = delete;
  CommunicatorGroup& operator=(const CommunicatorGroup&) = delete;

  int size() const { return job_.size(); }
  // "" when every create succeeded, else each failing rank's CreateError(), one per line.
  std::string CreateError() const;
  RankCommunicator& member(int rank) const { return *members_.at(static_cast<size_t>(rank)); }
  chorus_communicator* comm(int rank) const { return member(rank).get(); }
  const ThreadJob& job() const { return job_; }

 private:
  ThreadJob job_;
  std::vector<std::unique_ptr<RankCommunicator>> members_;
};

// ---- Transports (interface 5) ----------------------------------------------------------------

// One endpoint per rank of a ThreadJob of `size`, of transport `api` (a table of `plugin`),
// through chorus::TransportEndpoint: created at once (a thread per rank), destroyed at once.
class EndpointGroup {
 public:
  // config.rank, config.size and config.store are set per rank.
  EndpointGroup(std::shared_ptr<PluginLibrary> plugin, const chorus_transport_api& api, int size,
                const TransportConfig& config = {}, const std::string& store_prefix = "job/");
  ~EndpointGroup();
  EndpointGroup(const EndpointGroup&) = delete;
  EndpointGroup& operator=(const EndpointGroup&) = delete;

  int size() const { return job_.size(); }
  // "" when every create succeeded, else "rank r of n: create failed with STATUS: message" for
  // each failing rank, one per line.
  std::string CreateError() const;
  // What rank `rank`'s create threw (CHORUS_OK when it succeeded).
  chorus_status create_status(int rank) const {
    return create_statuses_.at(static_cast<size_t>(rank));
  }
  // Rank `rank`'s endpoint; NULL where create failed or after Destroy.
  TransportEndpoint* endpoint(int rank) const {
    return endpoints_.at(static_cast<size_t>(rank)).get();
  }
  // Destroys rank `rank`'s endpoint now (a rank that dies).
  void Destroy(int rank);
  const ThreadJob& job() const { return job_; }

 private:
  ThreadJob job_;
  std::vector<std::unique_ptr<TransportEndpoint>> endpoints_;
  std::vector<chorus_status> create_statuses_;
  std::vector<std::string> create_errors_;
};

// ---- Requests --------------------------------------------------------------------------------

// Completes an operation that returned `status` and `request` (NULL: it finished before it
// returned): waits up to timeout_ms, then frees the request. Returns the operation's status; on
// a failure *message (when given) holds the plugin's last_error(). A request still pending after
// the time-out is left live, since plugin.h allows freeing only a finished one, and the result
// is CHORUS_TIMEOUT.
chorus_status FinishRequest(const PluginLibrary& plugin, chorus_status status,
                            chorus_request* request, int64_t timeout_ms,
                            std::string* message = nullptr);

// A request of a plugin (a transport's isend or irecv), freed when this goes if it has
// finished; a pending one is left live (see FinishRequest). Move-only.
class PluginRequest {
 public:
  PluginRequest() = default;
  PluginRequest(const PluginLibrary& plugin, chorus_request* request)
      : plugin_(&plugin), request_(request) {}
  PluginRequest(PluginRequest&& other) noexcept;
  PluginRequest& operator=(PluginRequest&& other) noexcept;
  ~PluginRequest();

  bool empty() const { return request_ == nullptr; }
  // Waits up to timeout_ms: the operation's status, or CHORUS_TIMEOUT while it is pending. On a
  // failure *message (when given) holds the plugin's last_error().
  chorus_status Wait(int64_t timeout_ms, std::string* message = nullptr);
  // Whether it has finished (request_test); false for an empty request.
  bool Done();

 private:
  void Release();

  const PluginLibrary* plugin_ = nullptr;
  chorus_request* request_ = nullptr;
  bool finished_ = false;
};

// Starts a send (isend) or a receive (irecv) of `bytes` at `data` with `peer` and `tag` on
// `endpoint`'s own transport table. Returns what isend/irecv returned; the request in *out.
chorus_status StartSend(const TransportEndpoint& endpoint, int peer, uint64_t tag, const void* data,
                        size_t bytes, PluginRequest* out);
chorus_status StartReceive(const TransportEndpoint& endpoint, int peer, uint64_t tag, void* data,
                           size_t bytes, PluginRequest* out);

}  // namespace chorus::conformance

#endif  // CHORUS_CONFORMANCE_RANK_THREADS_H_
