#include "builtin/p2p_operation.h"

#include <chorus/plugin_sdk.hpp>
#include <sstream>
#include <utility>

#include "base/logging.h"

namespace chorus::internal {

P2pOperation::P2pOperation(const chorus_p2p& p2p, Kind kind, int peer, uint64_t tag, void* data,
                           size_t bytes, int64_t timeout_ms, const P2pContext& context,
                           bool* abandoned)
    : p2p_(&p2p),
      kind_(kind),
      peer_(peer),
      timeout_ms_(timeout_ms),
      context_(context),
      abandoned_(abandoned) {
  chorus_p2p_args args{};
  args.struct_size = sizeof(args);
  args.peer = peer;
  args.tag = tag;
  args.data = data;
  args.bytes = bytes;
  chorus_p2p_request* request = nullptr;
  sdk::LastErrorStorage().clear();  // so that a p2p which sets no message leaves no stale one
  const chorus_status status = kind == Kind::kSend ? p2p.isend(p2p.ctx, &args, &request)
                                                   : p2p.irecv(p2p.ctx, &args, &request);
  if (status != CHORUS_OK) sdk::Fail(status, Describe(), ": ", Detail(status));
  request_ = request;
}

P2pOperation::P2pOperation(P2pOperation&& other) noexcept { *this = std::move(other); }

P2pOperation& P2pOperation::operator=(P2pOperation&& other) noexcept {
  if (this != &other) {
    Abandon();
    p2p_ = other.p2p_;
    request_ = std::exchange(other.request_, nullptr);
    kind_ = other.kind_;
    peer_ = other.peer_;
    timeout_ms_ = other.timeout_ms_;
    context_ = other.context_;
    abandoned_ = other.abandoned_;
  }
  return *this;
}

P2pOperation::~P2pOperation() { Abandon(); }

void P2pOperation::Wait() {
  if (request_ == nullptr) return;
  sdk::LastErrorStorage().clear();
  const chorus_status status = p2p_->wait(p2p_->ctx, request_, timeout_ms_);
  if (status == CHORUS_OK) {
    p2p_->free(p2p_->ctx, std::exchange(request_, nullptr));
    return;
  }
  // Copied before Abandon() makes more calls into the p2p, which may overwrite it.
  const std::string detail = Detail(status);
  int done = 0;
  p2p_->test(p2p_->ctx, request_, &done);
  if (done != 0) {
    p2p_->free(p2p_->ctx, std::exchange(request_, nullptr));
  } else {
    Abandon();
  }
  if (status == CHORUS_TIMEOUT) {
    sdk::Fail(CHORUS_TIMEOUT, Describe(), ": waited ", timeout_ms_, " ms for rank ", peer_,
              ", which did not ", kind_ == Kind::kSend ? "take the data" : "send",
              " (is it stuck, or issuing a different collective?)");
  }
  sdk::Fail(status, Describe(), ": ", detail);
}

void P2pOperation::Abandon() noexcept {
  if (request_ == nullptr) return;
  // Another operation of the run failed. The core's p2p aborts its endpoint on a failure, so
  // this request finishes at once; another p2p gets the run's time-out to finish it.
  int done = 0;
  p2p_->test(p2p_->ctx, request_, &done);
  if (done == 0) {
    p2p_->wait(p2p_->ctx, request_, timeout_ms_);
    p2p_->test(p2p_->ctx, request_, &done);
  }
  if (done != 0) {
    p2p_->free(p2p_->ctx, std::exchange(request_, nullptr));
    return;
  }
  request_ = nullptr;  // left live: the p2p's owner aborts and frees it
  if (abandoned_ != nullptr) *abandoned_ = true;
  try {
    Log().warn("{}: left a live request to the transport after a failure", Describe());
  } catch (...) {
  }
}

std::string P2pOperation::Detail(chorus_status status) {
  // The core's p2p leaves the transport's message in this thread's last error; another p2p
  // (plugin.h gives chorus_p2p no last_error) may leave none.
  const std::string message = sdk::LastError();
  if (!message.empty()) return message;
  return std::string("the p2p failed with status ") + std::to_string(static_cast<int>(status)) +
         " and no message";
}

std::string P2pOperation::Describe() const {
  std::ostringstream out;
  out << context_.algorithm << ": rank " << p2p_->rank << ", "
      << (kind_ == Kind::kSend ? "sending to" : "receiving from") << " rank " << peer_ << " (";
  if (context_.phase[0] != '\0') out << context_.phase << " ";
  if (context_.steps > 0) out << "step " << context_.step << " of " << context_.steps << ", ";
  out << "segment " << context_.segment << " of " << context_.segments << ")";
  return out.str();
}

}  // namespace chorus::internal
