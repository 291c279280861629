// The chorus_p2p (plugin.h) the core hands an algorithm: point-to-point operations over any
// transport endpoint (the core's tcp or a plugin's), with the transport's requests and
// messages.
//
// Built for collectives, it makes the first failure of any operation (a lost peer, a wait that
// timed out, a size mismatch, an abort) abort the whole endpoint at once. That is what lets a
// failure reach every rank: the neighbours see this rank's connections close and fail in turn,
// so a rank waiting for data from a rank further around the ring does not wait out its whole
// time-out. It also completes every other request of the run at once, so the algorithm can free
// them and its scratch memory before it returns. The endpoint cannot be used after a failure.
#ifndef CHORUS_CORE_COLLECTIVE_P2P_H_
#define CHORUS_CORE_COLLECTIVE_P2P_H_

#include <chorus/plugin.h>

#include <mutex>
#include <string>
#include <vector>

namespace chorus::internal {

class CollectiveP2p {
 public:
  // `plugin` owns the transport (its request_* and last_error are used). All borrowed; they
  // outlive this object.
  CollectiveP2p(const chorus_plugin& plugin, const chorus_transport_api& transport,
                chorus_transport_endpoint* endpoint, int rank, int size);
  ~CollectiveP2p();
  CollectiveP2p(const CollectiveP2p&) = delete;
  CollectiveP2p& operator=(const CollectiveP2p&) = delete;

  const chorus_p2p* get() const { return &p2p_; }

  // Whether an operation failed (and the endpoint was aborted), and the first failure.
  bool failed() const;
  chorus_status failure_status() const;
  std::string failure_message() const;

  // Frees every request the algorithm did not free (after a failure; the endpoint is aborted,
  // so each one has finished or may be freed).
  void FreeLeftovers();

 private:
  static chorus_status Isend(void* ctx, const chorus_p2p_args* args, chorus_p2p_request** out);
  static chorus_status Irecv(void* ctx, const chorus_p2p_args* args, chorus_p2p_request** out);
  static chorus_status Wait(void* ctx, chorus_p2p_request* request, int64_t timeout_ms);
  static chorus_status Test(void* ctx, chorus_p2p_request* request, int* done);
  static void Free(void* ctx, chorus_p2p_request* request);

  chorus_status Start(bool send, const chorus_p2p_args* args, chorus_p2p_request** out);
  // Records the first failure, aborts the endpoint, and leaves the message for the caller.
  chorus_status Failed(chorus_status status, const char* what);

  const chorus_plugin& plugin_;
  const chorus_transport_api& transport_;
  chorus_transport_endpoint* const endpoint_;
  chorus_p2p p2p_{};
  mutable std::mutex mutex_;
  // Requests not freed yet: few at a time (an algorithm's step, a window); a vector, as a hash
  // set allocated a node per request on the p2p path.
  std::vector<chorus_request*> live_;
  chorus_status failure_status_ = CHORUS_OK;
  std::string failure_message_;
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_COLLECTIVE_P2P_H_
