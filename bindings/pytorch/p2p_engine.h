// P2pEngine: the point-to-point half of ProcessGroupChorus (send, recv, and the gather, scatter
// and all-to-all built from them), over one endpoint of a chorus transport (plugin.h interface
// 5: the core's tcp, shm, ucx, ofi or a vendor's).
//
// One thread of its own owns the endpoint: it starts each batch of sends and receives in the
// order given, then drives every started request to completion. torch's send and recv return at
// once, and a rank may send before it receives what its peer sends first, so neither may hold up
// the other: the requests of many batches are in flight together. The first failure (a lost
// peer, a size that does not match the sender's, a time-out) aborts the endpoint, as a failed
// collective ends a communicator: every other pending and later operation fails with a message
// that names the first failure.
#ifndef CHORUS_BINDINGS_PYTORCH_P2P_ENGINE_H_
#define CHORUS_BINDINGS_PYTORCH_P2P_ENGINE_H_

#include <chorus/collective/transport_endpoint.h>
#include <chorus/plugin.h>
#include <chorus/rendezvous/kv_store.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::torch_backend {

struct P2pOp {
  bool send = false;
  int peer = 0;
  uint64_t tag = 0;
  void* data = nullptr;  // borrowed until the batch's `done` has run
  size_t bytes = 0;
};

class P2pEngine {
 public:
  // What a batch's `done` is called with: nullptr when every operation completed, else a
  // chorus::Error naming the batch and the peer.
  using Done = std::function<void(std::exception_ptr)>;

  // `store` outlives the endpoint (the transport publishes its address there). `peer_names`:
  // how a rank is named in messages. `timeout`: how long a batch may take before the engine
  // gives up on it.
  P2pEngine(std::unique_ptr<CKvStore> store, std::unique_ptr<TransportEndpoint> endpoint,
            std::vector<std::string> peer_names, std::chrono::milliseconds timeout);
  // Waits for the batches in flight (each at most until its time-out), then destroys the
  // endpoint.
  ~P2pEngine();
  P2pEngine(const P2pEngine&) = delete;
  P2pEngine& operator=(const P2pEngine&) = delete;

  const char* transport() const { return endpoint_->api().name; }

  // Starts `ops` after every batch started before; `done` runs on the engine's thread. `what`
  // names the batch in messages ("gather to rank 0"; "": the failed operation's words alone).
  // `timeout`: zero for the engine's.
  void Start(std::string what, std::vector<P2pOp> ops, Done done,
             std::chrono::milliseconds timeout = {});
  // Start, then wait for the batch; throws its failure.
  void Run(std::string what, std::vector<P2pOp> ops, std::chrono::milliseconds timeout = {});

 private:
  struct Batch {
    std::string what;
    std::vector<P2pOp> ops;
    Done done;
    std::chrono::milliseconds timeout;
    std::chrono::steady_clock::time_point deadline;
    std::vector<chorus_request*> requests;  // one per started op; nullptr once finished
    size_t finished = 0;
  };

  void Loop();
  void Post(Batch& batch);
  // Tests the requests of `batch`; true when it ended (completed or failed, `done` called).
  bool Progress(Batch& batch);
  // Ends `batch` with `status`: aborts the endpoint on the first failure of the engine, frees
  // the batch's requests and calls `done`.
  void Finish(Batch& batch, chorus_status status, const std::string& message);
  std::string PeerName(int rank) const;
  std::string OpText(const P2pOp& op) const;  // "receive of 64 bytes from rank 1"

  std::unique_ptr<CKvStore> store_;
  std::unique_ptr<TransportEndpoint> endpoint_;
  const chorus_plugin& plugin_;
  std::vector<std::string> peer_names_;
  std::chrono::milliseconds timeout_;
  std::string first_failure_;  // the engine's thread only

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Batch> queued_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chorus::torch_backend

#endif  // CHORUS_BINDINGS_PYTORCH_P2P_ENGINE_H_
