// ucx_endpoint.h: one rank's endpoint of the ucx transport: a UCP context and worker of its own,
// a UCP endpoint to every rank (itself included), and the requests in flight.
//
// Threads: every UCX call is made under `mutex_` (the worker is UCS_THREAD_MODE_SERIALIZED). A
// progress thread per endpoint sleeps in poll() on the worker's event fd (ucp_worker_arm) and
// progresses the worker when it wakes, so a rank's sends and wire-up move while its caller waits
// on something else (the store, another endpoint). A wait spins on the worker for spin_us (not
// where this host runs more of the job's ranks than the process has cpus), then progresses it
// with sched_yield() between progresses for yield_us, then sleeps in poll() on the worker's event
// fd (on a condition variable that every completion and abort() notify where there is none).
//
// The progress thread stands back while a caller progresses the worker itself: while a wait
// spins, and for kHandOver after a caller last progressed, unless a wait sleeps. Waking beside a
// spinning caller on every message cost a core: on two cores, ping-pong latency was 2.6x
// ucx_perftest's. A wait that goes to sleep hands the worker over at once.
//
// Requests: every request not deleted yet is on one intrusive list (no allocation per request
// beyond the request itself); its flags say whether it is pending, held by UCX, or freed.
//
// Same-host peers: with same_host=shared_memory (the default) they are connected without UCX's
// peer failure handling where UCX then carries their messages over shared memory alone
// (transport_path.h), else, as with same_host=peer_failure, with it (UCX then takes tcp or RDMA
// loopback). Peers on other hosts always get it.
//
// A lost peer becomes PEER_LOST three ways, whichever comes first: UCX's error handler on the
// endpoint (UCP_ERR_HANDLING_MODE_PEER: tcp, InfiniBand notice a closed connection; without it,
// a transport that fails on the peer: cma reading a dead peer's memory), the peer's "closed" key
// in the store (set by its destroy or abort, after it flushed its sends), and for a peer on the
// same host /proc/<pid> of its process (shared memory has no UCX peer failure detection).
#ifndef CHORUS_PLUGINS_UCX_UCX_ENDPOINT_H_
#define CHORUS_PLUGINS_UCX_UCX_ENDPOINT_H_

#include <chorus/plugin.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chorus/host_cpus.hpp>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "options.h"
#include "peer_process.h"

namespace chorus::ucx {

class Endpoint;

// One send or receive. Fields other than `endpoint` are guarded by the endpoint's mutex.
struct Request {
  Endpoint* endpoint = nullptr;  // NULL once the endpoint was destroyed
  void* ucx = nullptr;           // the UCP request while UCX still works on it
  bool receive = false;
  int32_t peer = 0;
  uint64_t tag = 0;
  size_t bytes = 0;
  // Set (release) under the endpoint's mutex after status and message; a wait reads it (acquire)
  // without the mutex first, so a send completed in place costs its wait no lock.
  std::atomic<bool> done{false};
  chorus_status status = CHORUS_OK;
  std::string message;    // of a failure, handed out at every wait and test
  bool freed = false;     // request_free came while UCX still held it: its callback deletes it
  bool ucx_done = false;  // UCX called back (and its request was released)
  Request* live_prev = nullptr;  // the endpoint's list of requests not deleted yet
  Request* live_next = nullptr;
};

class Endpoint {
 public:
  // Creates the UCP context and worker, publishes this rank's address and connects to every
  // rank. Throws Error: UNAVAILABLE when UCX has no usable transport, TIMEOUT when a rank does
  // not publish in time.
  Endpoint(const chorus_transport_create_args& args, const EndpointOptions& options);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }

  Request* Send(int32_t peer, uint64_t tag, const void* data, size_t bytes);
  Request* Receive(int32_t peer, uint64_t tag, void* data, size_t bytes);
  // Whether `request` finished within timeout_ms (negative: no limit); progresses the worker.
  bool Wait(Request& request, int64_t timeout_ms);
  bool Test(Request& request);
  void Free(Request* request);
  void Abort();

 private:
  struct Peer {
    Endpoint* owner = nullptr;
    int32_t rank = 0;
    ucp_ep_h ep = nullptr;
    bool peer_mode = true;  // UCP_ERR_HANDLING_MODE_PEER; false: a same-host peer without it
    // On this machine (its process can be watched) and, for the path, on this host as the job
    // counts hosts (the same host_id too): a machine's ranks that play two hosts are same_machine
    // but not same_host.
    bool same_machine = false;
    bool same_host = false;
    ProcessIdentity process;
    bool lost = false;
    std::string lost_reason;
    std::string ucx_error;  // what UCX's error handler reported, until ProgressLocked acts on it
    std::chrono::steady_clock::time_point next_check{};
  };

  void Connect(int64_t timeout_ms);
  // Whether this endpoint connects its host's peers without UCX's peer failure handling (see the
  // top of this file); where same_host=shared_memory cannot have it, *why says why not.
  bool SameHostWithoutPeerMode(std::string* why) const;
  void ConnectPeer(Peer& peer, const PeerRecord& record);
  // Closes a UCP endpoint no message went over yet, by force, within a second.
  void DiscardEndpointLocked(ucp_ep_h ep);
  void Handshake(std::chrono::steady_clock::time_point deadline);
  Request* Start(bool receive, int32_t peer, uint64_t tag, void* data, size_t bytes,
                 uint64_t ucp_tag);
  // Progresses the worker until it has nothing to do (until_idle), or once; how many events
  // UCX handled.
  unsigned ProgressLocked(bool until_idle = true);
  // After a progress that left `request` pending: records the caller's progress at `now`, looks
  // at the request's peer when that is due; whether the request is done now.
  bool CheckAfterProgress(Request& request, std::chrono::steady_clock::time_point now);
  void ProgressLoop();
  bool ProgressThreadStandsBackLocked() const;
  void LinkLocked(Request& request);
  void UnlinkLocked(Request& request);
  // Requests come from and go back to a few spares (no allocation per message once warm).
  std::unique_ptr<Request> NewRequestLocked();
  void RecycleLocked(std::unique_ptr<Request> request);
  // Unlinks a request neither the caller nor UCX holds any more, and recycles it.
  void DeleteLocked(Request& request);
  // The live requests that `keep` selects, copied: acting on one may delete it.
  template <typename Predicate>
  std::vector<Request*> LiveLocked(Predicate keep) const;
  void StopProgressThread();
  void FinishLocked(Request& request, chorus_status status, std::string message);
  void MarkPeerLostLocked(Peer& peer, const std::string& reason);
  void CancelLocked(Request& request);
  void CheckPeer(int32_t peer);
  bool PeerGoneLocked(const Peer& peer);
  void CloseEndpointsLocked(bool force, std::vector<void*>& closing);
  // How many requests UCX still holds that it will hand back once their endpoint is closed:
  // receives (cancelled) and sends to peers with PEER mode. A send to a peer without it stays
  // with UCX until the worker is destroyed (UCX 1.13 never fails a rendezvous send on an endpoint
  // closed by force without PEER mode), so destroy does not wait for it: with a stopped peer
  // that wait took destroy's whole bound.
  size_t CallbacksDueLocked() const;
  void WaitForCloses(std::vector<void*>& closing, std::chrono::steady_clock::time_point deadline);
  void PublishClosed();

  static void OnSendDone(void* ucx, ucs_status_t status, void* user_data);
  static void OnReceiveDone(void* ucx, ucs_status_t status, const ucp_tag_recv_info_t* info,
                            void* user_data);
  static void OnPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  void UcxDoneLocked(Request& request, ucs_status_t status, size_t received);

  std::string Key(const std::string& what, int32_t rank) const;

  const int32_t rank_, size_;
  const sdk::StoreView store_;
  const EndpointOptions options_;
  const std::string host_id_;  // the create args' host_id ("" when none was given)
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<Peer> peers_;
  bool oversubscribed_ = false;  // more ranks on this host than cpus: waits yield, never spin
  bool same_host_without_peer_mode_ = false;  // SameHostWithoutPeerMode(), set by Connect

  std::mutex mutex_;
  std::condition_variable finished_;  // notified whenever a request finishes
  std::thread progress_thread_;
  std::atomic<bool> stopping_{false};
  bool peer_errors_ = false;  // some Peer::ucx_error is waiting for ProgressLocked
  std::atomic<bool> aborted_{false};
  std::atomic<bool> closed_published_{false};
  static constexpr size_t kSpareRequests = 64;
  std::vector<std::unique_ptr<Request>> spare_;
  Request* live_ = nullptr;     // head of the list of requests not deleted yet
  size_t in_ucx_ = 0;           // how many of them UCX still holds
  std::vector<void*> closing_;  // ucp_ep_close_nbx requests of abort()

  // The progress thread's hand-over (see the top of this file).
  std::condition_variable progress_idle_;          // wakes the progress thread when it stands back
  std::atomic<int> spinning_{0};                   // waits spinning on the worker now
  std::atomic<int> sleeping_{0};                   // waits asleep on finished_
  std::atomic<int> efd_sleepers_{0};               // waits asleep in poll() on the event fd
  chorus::sdk::CallerHandOver caller_progressed_;  // when a caller last progressed the worker
};

}  // namespace chorus::ucx

#endif  // CHORUS_PLUGINS_UCX_UCX_ENDPOINT_H_
