// One point-to-point operation of an algorithm in flight over a chorus_p2p, owning its request.
// Wait() finishes it and throws sdk::Error with a message that names the operation, the peer and
// where in the algorithm it was; the destructor (reached when another operation failed) waits
// for it to end and frees it, so no request outlives the run and nothing writes into the run's
// buffers after it returns.
#ifndef CHORUS_CORE_P2P_OPERATION_H_
#define CHORUS_CORE_P2P_OPERATION_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::internal {

// Where an operation stands in its algorithm, for messages.
struct P2pContext {
  const char* algorithm = "";  // "ring all_reduce"
  const char* phase = "";      // "reduce-scatter"
  size_t step = 0, steps = 0;  // 1-based step of `steps`; steps == 0: no steps
  size_t segment = 0, segments = 0;
};

class P2pOperation {
 public:
  enum class Kind { kSend, kRecv };

  P2pOperation() = default;
  // Starts a send or receive; throws sdk::Error when it cannot start. *abandoned is set when
  // the operation could not be finished and was left live (see below); it outlives this.
  P2pOperation(const chorus_p2p& p2p, Kind kind, int peer, uint64_t tag, void* data, size_t bytes,
               int64_t timeout_ms, const P2pContext& context, bool* abandoned);
  P2pOperation(P2pOperation&& other) noexcept;
  P2pOperation& operator=(P2pOperation&& other) noexcept;
  P2pOperation(const P2pOperation&) = delete;
  P2pOperation& operator=(const P2pOperation&) = delete;
  ~P2pOperation();

  // Waits up to the time-out and frees the request. Throws sdk::Error on failure: TIMEOUT naming
  // the peer waited for, or the transport's status and message.
  void Wait();

 private:
  void Abandon() noexcept;
  std::string Describe() const;
  static std::string Detail(chorus_status status);

  const chorus_p2p* p2p_ = nullptr;
  chorus_p2p_request* request_ = nullptr;
  Kind kind_ = Kind::kSend;
  int peer_ = -1;
  int64_t timeout_ms_ = -1;
  P2pContext context_;
  // Set when a failed run could not finish this operation and left its request live for the
  // p2p's owner to abort: then the memory it points to must not be freed.
  bool* abandoned_ = nullptr;
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_P2P_OPERATION_H_
