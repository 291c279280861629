#include <chorus/base/error.h>
#include <chorus/conformance/rank_threads.h>

#include <chrono>
#include <thread>
#include <utility>

namespace chorus::conformance {
namespace {

std::string RankOf(int rank, int size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

}  // namespace

// ---- Threads ---------------------------------------------------------------------------------

bool RankFailures::ok() const {
  for (const auto& failure : by_rank_) {
    if (!failure.empty()) return false;
  }
  return true;
}

std::string RankFailures::Joined() const {
  std::string all;
  for (const auto& failure : by_rank_) {
    if (!failure.empty()) all += failure + "\n";
  }
  return all;
}

RankFailures RunRankThreadsReturning(int size, const std::function<std::string(int rank)>& body) {
  std::vector<std::string> failures(static_cast<size_t>(size > 0 ? size : 0));
  std::vector<std::thread> threads;
  threads.reserve(failures.size());
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      std::string failure;
      try {
        failure = body(rank);
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "threw an exception that is not a std::exception";
      }
      if (!failure.empty()) {
        failures[static_cast<size_t>(rank)] = "rank " + std::to_string(rank) + ": " + failure;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return RankFailures(std::move(failures));
}

// ---- The rendezvous of a job -----------------------------------------------------------------

ThreadJob::ThreadJob(int size, const std::string& prefix) : shared_(MakeInProcessStore()) {
  if (size < 1) throw Error(CHORUS_INVALID_ARGUMENT, "a job needs at least 1 rank");
  for (int rank = 0; rank < size; ++rank) {
    stores_.push_back(std::make_unique<CKvStore>(WithPrefix(shared_, prefix)));
  }
}

const chorus_kv_store* ThreadJob::store(int rank) const {
  return stores_.at(static_cast<size_t>(rank))->get();
}

// ---- Collectives -----------------------------------------------------------------------------

RankCommunicator::RankCommunicator(std::shared_ptr<PluginLibrary> plugin,
                                   const chorus_collective_api& api, const chorus_kv_store* store,
                                   int rank, int size, const CommunicatorSettings& settings)
    : plugin_(std::move(plugin)), api_(api), rank_(rank), size_(size) {
  std::vector<chorus_option> options;
  for (const auto& [key, value] : settings.options) options.push_back({key.c_str(), value.c_str()});
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = rank;
  args.size = size;
  args.store = store;
  args.timeout_ms = settings.timeout_ms;
  args.options = options.data();
  args.num_options = options.size();
  if (settings.devices != nullptr) {
    args.devices_api = &settings.devices->api();
    args.devices = settings.devices->context();
    args.device = static_cast<uint32_t>(rank);
    args.devices_last_error = settings.devices->library().table().last_error;
  }
  const auto start = std::chrono::steady_clock::now();
  status_ = api_.create(&args, &comm_);
  create_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status_ != CHORUS_OK) {
    last_error_ = plugin_->LastError();
    comm_ = nullptr;
  } else if (comm_ == nullptr) {
    status_ = CHORUS_INTERNAL;
    last_error_ = "create returned OK but left its out-pointer NULL; set *out on CHORUS_OK";
  }
}

RankCommunicator::~RankCommunicator() { Destroy(); }

void RankCommunicator::Destroy() {
  if (comm_ != nullptr) api_.destroy(std::exchange(comm_, nullptr));
}

std::string RankCommunicator::CreateError() const {
  if (status_ == CHORUS_OK) return "";
  return RankOf(rank_, size_) + ": create failed with " + StatusName(status_) + ": " + last_error_ +
         "; create must succeed on every rank given a valid rank, size and store";
}

CommunicatorGroup::CommunicatorGroup(std::shared_ptr<PluginLibrary> plugin,
                                     const chorus_collective_api& api, int size,
                                     const CommunicatorSettings& settings,
                                     const std::string& store_prefix)
    : job_(size, store_prefix), members_(static_cast<size_t>(size)) {
  const RankFailures failures = RunRankThreads(size, [&](int rank) {
    members_[static_cast<size_t>(rank)] =
        std::make_unique<RankCommunicator>(plugin, api, job_.store(rank), rank, size, settings);
  });
  // Only allocation can throw here; a member that is missing is a failure to report, not a hole.
  if (!failures.ok()) throw Error(CHORUS_INTERNAL, failures.Joined());
}

CommunicatorGroup::~CommunicatorGroup() {
  // At once: a plugin may barrier in destroy.
  (void)RunRankThreads(size(), [&](int rank) { members_[static_cast<size_t>(rank)].reset(); });
}

std::string CommunicatorGroup::CreateError() const {
  std::string all;
  for (const auto& member : members_) {
    if (member->status() != CHORUS_OK) all += member->CreateError() + "\n";
  }
  return all;
}

// ---- Transports ------------------------------------------------------------------------------

EndpointGroup::EndpointGroup(std::shared_ptr<PluginLibrary> plugin, const chorus_transport_api& api,
                             int size, const TransportConfig& config,
                             const std::string& store_prefix)
    : job_(size, store_prefix),
      endpoints_(static_cast<size_t>(size)),
      create_statuses_(static_cast<size_t>(size), CHORUS_OK),
      create_errors_(static_cast<size_t>(size)) {
  const RankFailures failures = RunRankThreads(size, [&](int rank) {
    TransportConfig mine = config;
    mine.rank = rank;
    mine.size = size;
    mine.store = job_.store(rank);
    try {
      endpoints_[static_cast<size_t>(rank)] = TransportEndpoint::Create(plugin, api, mine);
    } catch (const Error& e) {
      create_statuses_[static_cast<size_t>(rank)] = e.status();
      create_errors_[static_cast<size_t>(rank)] =
          RankOf(rank, size) + ": create failed with " + StatusName(e.status()) + ": " + e.what();
    }
  });
  if (!failures.ok()) throw Error(CHORUS_INTERNAL, failures.Joined());
}

EndpointGroup::~EndpointGroup() {
  (void)RunRankThreads(size(), [&](int rank) { Destroy(rank); });
}

void EndpointGroup::Destroy(int rank) { endpoints_.at(static_cast<size_t>(rank)).reset(); }

std::string EndpointGroup::CreateError() const {
  std::string all;
  for (const auto& error : create_errors_) {
    if (!error.empty()) all += error + "\n";
  }
  return all;
}

// ---- Requests --------------------------------------------------------------------------------

chorus_status FinishRequest(const PluginLibrary& plugin, chorus_status status,
                            chorus_request* request, int64_t timeout_ms, std::string* message) {
  PluginRequest owned(plugin, request);
  if (status == CHORUS_OK && !owned.empty()) return owned.Wait(timeout_ms, message);
  if (status != CHORUS_OK && message != nullptr) *message = plugin.LastError();
  return status;
}

PluginRequest::PluginRequest(PluginRequest&& other) noexcept
    : plugin_(other.plugin_),
      request_(std::exchange(other.request_, nullptr)),
      finished_(other.finished_) {}

PluginRequest& PluginRequest::operator=(PluginRequest&& other) noexcept {
  if (this != &other) {
    Release();
    plugin_ = other.plugin_;
    request_ = std::exchange(other.request_, nullptr);
    finished_ = other.finished_;
  }
  return *this;
}

PluginRequest::~PluginRequest() { Release(); }

void PluginRequest::Release() {
  if (request_ == nullptr) return;
  if (finished_ || Done()) plugin_->table().request_free(request_);
  request_ = nullptr;
}

chorus_status PluginRequest::Wait(int64_t timeout_ms, std::string* message) {
  if (request_ == nullptr) {
    if (message != nullptr) *message = "no request to wait on";
    return CHORUS_INVALID_ARGUMENT;
  }
  const chorus_status status = plugin_->table().request_wait(request_, timeout_ms);
  if (status != CHORUS_TIMEOUT) finished_ = true;
  if (message != nullptr) {
    *message = status == CHORUS_OK ? ""
               : status == CHORUS_TIMEOUT
                   ? "still pending after " + std::to_string(timeout_ms) + " ms"
                   : plugin_->LastError();
  }
  return status;
}

bool PluginRequest::Done() {
  if (request_ == nullptr) return false;
  if (finished_) return true;
  int done = 0;
  plugin_->table().request_test(request_, &done);
  finished_ = done != 0;
  return finished_;
}

namespace {

chorus_status Start(const TransportEndpoint& endpoint, bool send, int peer, uint64_t tag,
                    void* data, size_t bytes, PluginRequest* out) {
  chorus_p2p_args args{};
  args.struct_size = sizeof(args);
  args.peer = peer;
  args.tag = tag;
  args.data = data;
  args.bytes = bytes;
  chorus_request* request = nullptr;
  const chorus_transport_api& api = endpoint.api();
  const chorus_status status = send ? api.isend(endpoint.handle(), &args, &request)
                                    : api.irecv(endpoint.handle(), &args, &request);
  *out = PluginRequest(endpoint.library(), request);
  return status;
}

}  // namespace

chorus_status StartSend(const TransportEndpoint& endpoint, int peer, uint64_t tag, const void* data,
                        size_t bytes, PluginRequest* out) {
  // The transport reads a send's buffer only; chorus_p2p_args has one pointer for both ways.
  return Start(endpoint, true, peer, tag, const_cast<void*>(data), bytes, out);
}

chorus_status StartReceive(const TransportEndpoint& endpoint, int peer, uint64_t tag, void* data,
                           size_t bytes, PluginRequest* out) {
  return Start(endpoint, false, peer, tag, data, bytes, out);
}

}  // namespace chorus::conformance
