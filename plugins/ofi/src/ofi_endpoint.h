// One rank's endpoint of the "ofi" transport: a libfabric reliable-datagram endpoint (FI_EP_RDM)
// with tagged messages, an address vector holding every rank's address (exchanged through the
// rendezvous store), and one completion queue with a wait descriptor (FI_WAIT_FD) that a progress
// thread of the endpoint sleeps on in poll() (after fi_trywait), with an eventfd beside it that
// abort and destroy write to, so that no core spins while nothing happens.
//
// Requests: every isend/irecv becomes one provider operation per chunk (a message larger than
// the provider's max_msg_size, or than the option chunk_bytes, is split, and so is one a little
// above ofi_rxm's eager limit, into pieces of that limit: message_pieces.h; chunks of one message
// are posted together, so the send-after-send order keeps them in place). The progress thread
// reads completions and marks requests done. A wait first reads the completion queue itself for
// spin_us (while completions keep coming, for spin_us after the last), so a short message costs
// no hop through the progress thread, then for yield_us more with sched_yield() between reads;
// then it sleeps on a condition variable. Where this host runs more of the job's ranks than the
// process has cpus, waits do not spin but yield from the start: a spinning rank would hold the
// core the rank it waits for needs, and a sleeping one answers a time slice late.
//
// A lost peer: receives in RDM are not tied to a connection, so the progress thread watches the
// peers that pending receives wait on and pending sends go to: a peer process on this host (same
// boot and pid namespace) that has exited (kill(pid, 0), or a zombie), a peer that closed its
// endpoint (its key "closed/<rank>" in the store), or a peer a send failed to with a connection
// error. Their pending and later receives, and the sends pending to them, fail with
// CHORUS_PEER_LOST (plugin.h transport rule T4).
#ifndef CHORUS_OFI_OFI_ENDPOINT_H_
#define CHORUS_OFI_OFI_ENDPOINT_H_

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <sys/types.h>

#include <atomic>
#include <chorus/host_cpus.hpp>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "provider.h"
#include "tag_layout.h"

struct chorus_request;

namespace chorus::ofi {

// One provider operation (a chunk of a message). `context` comes first: the provider's scratch
// space (FI_CONTEXT2 mode) and what its completion's op_context points back to.
struct Operation {
  fi_context2 context;
  chorus_request* request = nullptr;
  size_t offset = 0;  // of the chunk in the message
  size_t length = 0;
};

// Options of create (sdk::FindOption keys): provider, address, chunk_bytes, eager_bytes,
// directed_receive, spin_us, yield_us.
struct EndpointOptions {
  std::string provider;      // "" = FI_PROVIDER, else tcp;ofi_rxm
  std::string bind_host;     // where a socket provider listens
  uint64_t chunk_bytes = 0;  // 0 = the provider's max_msg_size
  // Messages above this and up to kEagerPieces times it go in pieces of it; unset ("auto"): the
  // provider's eager limit (RxmEagerLimit); 0: never.
  std::optional<uint64_t> eager_bytes;
  bool directed_receive = true;  // off: the source rank goes into the tag even where not needed
  int64_t spin_us = 50;          // how long a wait reads the completion queue itself; 0: never
  // How long it then reads with sched_yield() between reads before it sleeps: a wait that slept
  // answers late, so its peer's spin runs out too, and a ping-pong of two sleeping ranks stays
  // at the progress thread's pace (measured: 45 against 8 us a message, in either mode for good).
  int64_t yield_us = 1000;
};
EndpointOptions ParseOptions(const chorus_transport_create_args& args);

// What a rank publishes about itself in the store ("ofi/<rank>").
struct PeerCard {
  pid_t pid = 0;
  std::string liveness_domain;  // boot id + pid namespace: where kill(pid, 0) means something
  std::string host_id;
  std::string provider;
  std::string pieces;   // "chunk_bytes/eager_bytes": how messages are split, equal on every rank
  std::string address;  // fi_getname's bytes
  std::string Encode() const;
  static PeerCard Decode(const std::string& text, int rank);
};

}  // namespace chorus::ofi

struct chorus_request {
  enum class Kind { kSend, kReceive };
  Kind kind = Kind::kSend;
  chorus_transport_endpoint* endpoint = nullptr;  // NULL once the endpoint was destroyed
  int peer = 0;
  uint64_t tag = 0;
  size_t bytes = 0;
  std::vector<chorus::ofi::Operation> operations;
  // The rest is guarded by the endpoint's mutex (while it has one).
  size_t live_operations = 0;  // posted, completion not yet read
  bool done = false;
  chorus_status status = CHORUS_OK;
  std::string message;
  bool freed = false;  // request_free came while operations were live: the endpoint deletes it
};

struct chorus_transport_endpoint {
 public:
  static std::unique_ptr<chorus_transport_endpoint> Create(const chorus_transport_create_args& a);
  ~chorus_transport_endpoint();

  chorus_request* Start(chorus_request::Kind kind, const chorus_p2p_args& args);
  void Abort();
  // request_wait / request_test / request_free of this endpoint's requests.
  chorus_status Wait(chorus_request& request, int64_t timeout_ms);
  chorus_status Test(chorus_request& request, int* done);
  void Free(chorus_request* request);
  // Cancels what the provider still holds of `request` and waits for it to let go, within one
  // window of kDrainMs from the endpoint's first drain; whether it did.
  bool DrainLocked(chorus_request& request, std::unique_lock<std::mutex>& lock);
  static constexpr int kDrainMs = 500;

 private:
  struct Peer {
    fi_addr_t address = FI_ADDR_UNSPEC;
    chorus::ofi::PeerCard card;
    bool lost = false;
    std::string lost_reason;
    std::chrono::steady_clock::time_point closed_seen{};
    // An endpoint of this process over shm, which libfabric reaches through that endpoint's own
    // memory (ShmEndpointsOfThisProcess in ofi_endpoint.cc).
    bool in_this_process_shm = false;
  };
  using Clock = std::chrono::steady_clock;

  chorus_transport_endpoint(const chorus_transport_create_args& a,
                            const chorus::ofi::EndpointOptions& options);
  void OpenFabric(const chorus::ofi::EndpointOptions& options);
  void Rendezvous(const std::string& host_id);
  void Post(chorus_request& request);
  // Reads the completion queue once: waits up to wait_ms for a completion (0: only looks). The
  // number of completions and errors it handled.
  size_t ReadCompletions(int wait_ms);
  // A wait's spin: reads completions on the caller's thread until `request` is done, spin_us and
  // then yield_us pass without a completion, or `deadline`; whether the request is done.
  bool SpinOn(chorus_request& request, Clock::time_point deadline);
  void WaitForCompletions(int wait_ms);
  void WakeProgress();
  // Reads the completion queue until it is empty (at most kDrainReads reads).
  void DrainCompletions();
  // Holds match_mutex_ where serialize_matching_ says so, else nothing.
  std::unique_lock<std::mutex> MatchingLock();
  void OnCompletion(const fi_cq_tagged_entry& entry);
  void OnError(const fi_cq_err_entry& error);
  // Under mutex_: ends `request` (first status wins), cancels its live operations, wakes waiters.
  void FailLocked(chorus_request& request, chorus_status status, const std::string& message);
  void FinishOperationLocked(chorus_request& request);
  void MarkPeerLost(int peer, const std::string& reason);
  void WatchPeers();
  void RemoveRegionOfDeadPeer(const std::string& address);
  // Whether a waiting caller reads the completion queue itself now or did so a moment ago.
  bool ProgressThreadStandsBack() const;
  void ProgressLoop();
  std::string PeerName(int peer) const;
  void Close();

  const int rank_, size_;
  const int64_t timeout_ms_;
  const chorus::sdk::StoreView store_;
  std::string provider_;
  chorus::ofi::InfoPtr info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  int wait_fd_ = -1;    // the CQ's wait descriptor (FI_WAIT_FD, FI_GETWAIT); -1 without one
  int wakeup_fd_ = -1;  // an eventfd that abort and destroy write to wake the progress thread
  bool directed_ = false;
  size_t chunk_bytes_ = 0;
  size_t eager_bytes_ = 0;  // messages in (eager_bytes_, kEagerPieces x eager_bytes_] go in pieces
  const int64_t spin_us_, yield_us_;
  bool oversubscribed_ = false;  // more ranks on this host than cpus: waits yield, never spin
  std::unique_ptr<chorus::ofi::TagLayout> tags_;
  std::vector<Peer> peers_;
  bool registered_in_process_ = false;  // this endpoint's address is in ShmEndpointsOfThisProcess

  std::mutex mutex_;  // guards requests' state, requests_ and peers_' lost fields
  std::optional<Clock::time_point> drain_until_;  // DrainLocked's window, under mutex_
  std::condition_variable changed_;
  std::condition_variable progress_idle_;    // wakes a progress thread that stands back
  std::atomic<int> spinning_{0};             // waits reading the completion queue themselves
  chorus::sdk::CallerHandOver caller_read_;  // when a wait last got its request by its own reads
  // Every request handed out and not yet deleted: destroy detaches them (a request may be
  // freed after its endpoint), and deletes those freed while the provider held them.
  std::set<chorus_request*> requests_;
  std::mutex post_mutex_;  // keeps the chunks of one message together
  // libfabric 1.17's shm (smr_progress_cmd_msg) looks for a posted receive that matches an
  // incoming message, lets go of its lock, and only then queues the message as unexpected: a
  // receive posted on another thread in between finds neither, waits for the next message of its
  // tag (wrong data), and the first one is never delivered (a hang). Where serialize_matching_
  // holds (shm), fi_trecv and the calls that progress (fi_cq_read, fi_trywait) take match_mutex_,
  // so a receive is posted wholly before or wholly after a match.
  bool serialize_matching_ = false;
  std::mutex match_mutex_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closed_{false};
  std::thread progress_;
};

#endif  // CHORUS_OFI_OFI_ENDPOINT_H_
