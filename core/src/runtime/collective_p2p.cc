#include "runtime/collective_p2p.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <string>
#include <vector>

namespace chorus::internal {
namespace {

CollectiveP2p& Self(void* ctx) { return *static_cast<CollectiveP2p*>(ctx); }

// chorus_p2p.last_error (1.6): per thread, as plugin.h's last_error. One string for every
// CollectiveP2p: the message of the last failed call of this thread through any of them is what
// an algorithm that just saw the failure reads.
thread_local std::string t_last_error;

const char* LastError(void*) { return t_last_error.c_str(); }

chorus_request* AsRequest(chorus_p2p_request* request) {
  return reinterpret_cast<chorus_request*>(request);
}

}  // namespace

CollectiveP2p::CollectiveP2p(const chorus_plugin& plugin, const chorus_transport_api& transport,
                             chorus_transport_endpoint* endpoint, int rank, int size)
    : plugin_(plugin), transport_(transport), endpoint_(endpoint) {
  p2p_.struct_size = sizeof(p2p_);
  p2p_.ctx = this;
  p2p_.rank = rank;
  p2p_.size = size;
  p2p_.isend = Isend;
  p2p_.irecv = Irecv;
  p2p_.wait = Wait;
  p2p_.test = Test;
  p2p_.free = Free;
  p2p_.last_error = LastError;
}

CollectiveP2p::~CollectiveP2p() { FreeLeftovers(); }

bool CollectiveP2p::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_status_ != CHORUS_OK;
}

chorus_status CollectiveP2p::failure_status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_status_;
}

std::string CollectiveP2p::failure_message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_message_;
}

void CollectiveP2p::FreeLeftovers() {
  std::vector<chorus_request*> leftovers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_.empty()) return;
    leftovers.swap(live_);
  }
  // plugin.h allows freeing a request whose endpoint was aborted; abort first in case no
  // failure did (a destroy after a run that returned early).
  transport_.abort(endpoint_);
  for (chorus_request* request : leftovers) plugin_.request_free(request);
}

chorus_status CollectiveP2p::Failed(chorus_status status, const char* what) {
  const char* detail = plugin_.last_error();
  std::string message = detail != nullptr && *detail != '\0'
                            ? std::string(detail)
                            : std::string("the transport's ") + what + " failed";
  if (status == CHORUS_TIMEOUT) message = std::string(what) + " timed out";
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_status_ == CHORUS_OK) {
      failure_status_ = status;
      failure_message_ = message;
      first = true;
    }
  }
  if (first) transport_.abort(endpoint_);
  t_last_error = message;
  // The core's own algorithm reads the message from here, a plugin's from last_error.
  return sdk::SetError(status, std::move(message));
}

chorus_status CollectiveP2p::Start(bool send, const chorus_p2p_args* args,
                                   chorus_p2p_request** out) {
  if (out == nullptr) {
    t_last_error = "p2p: request is NULL";
    return sdk::SetError(CHORUS_INVALID_ARGUMENT, t_last_error);
  }
  *out = nullptr;
  chorus_request* request = nullptr;
  const chorus_status status = send ? transport_.isend(endpoint_, args, &request)
                                    : transport_.irecv(endpoint_, args, &request);
  if (status != CHORUS_OK) return Failed(status, send ? "isend" : "irecv");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.push_back(request);
  }
  *out = reinterpret_cast<chorus_p2p_request*>(request);
  return CHORUS_OK;
}

chorus_status CollectiveP2p::Isend(void* ctx, const chorus_p2p_args* args,
                                   chorus_p2p_request** out) {
  return Self(ctx).Start(true, args, out);
}

chorus_status CollectiveP2p::Irecv(void* ctx, const chorus_p2p_args* args,
                                   chorus_p2p_request** out) {
  return Self(ctx).Start(false, args, out);
}

chorus_status CollectiveP2p::Wait(void* ctx, chorus_p2p_request* request, int64_t timeout_ms) {
  CollectiveP2p& self = Self(ctx);
  const chorus_status status = self.plugin_.request_wait(AsRequest(request), timeout_ms);
  return status == CHORUS_OK ? status : self.Failed(status, "wait");
}

chorus_status CollectiveP2p::Test(void* ctx, chorus_p2p_request* request, int* done) {
  CollectiveP2p& self = Self(ctx);
  const chorus_status status = self.plugin_.request_test(AsRequest(request), done);
  return status == CHORUS_OK ? status : self.Failed(status, "test");
}

void CollectiveP2p::Free(void* ctx, chorus_p2p_request* request) {
  CollectiveP2p& self = Self(ctx);
  {
    std::lock_guard<std::mutex> lock(self.mutex_);
    std::vector<chorus_request*>& live = self.live_;
    // Few live at once (an algorithm's step, a window); the order does not matter.
    const auto found = std::find(live.rbegin(), live.rend(), AsRequest(request));
    if (found != live.rend()) {
      *found = live.back();
      live.pop_back();
    }
  }
  self.plugin_.request_free(AsRequest(request));
}

}  // namespace chorus::internal
