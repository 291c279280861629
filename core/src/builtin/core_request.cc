#include "builtin/core_request.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <chrono>

namespace chorus::internal {
namespace {

// What a chorus_request* of the builtin plugin points to. The tag catches a pointer that is not
// one of ours (another plugin's request, a freed one) before anything else is read through it.
struct RequestHandle {
  static constexpr uint64_t kTag = 0x71657265726f6343ull;  // "Corereq"
  uint64_t tag = kTag;
  std::shared_ptr<CoreRequest> request;
};

CoreRequest& RequireRequest(chorus_request* request, const char* what) {
  auto* handle = reinterpret_cast<RequestHandle*>(request);
  if (handle == nullptr) sdk::Fail(CHORUS_INVALID_ARGUMENT, "core ", what, ": request is NULL");
  if (handle->tag != RequestHandle::kTag || !handle->request) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "core ", what,
              ": not a request of the core plugin (or one already freed)");
  }
  return *handle->request;
}

// Beyond this a time-out counts as "no limit" (and would overflow the clock's nanoseconds).
constexpr int64_t kForeverMs = int64_t{1} << 40;

}  // namespace

bool CallerProgress::PollOnce() {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (!poll_) return false;
  poll_();
  return true;
}

void CallerProgress::Detach() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  poll_ = nullptr;
}

void CoreRequest::Complete(chorus_status status, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
    status_ = status;
    message_ = std::move(message);
    done_flag_.store(true, std::memory_order_release);
  }
  finished_.notify_all();
}

bool CoreRequest::Test(chorus_status* status, std::string* message) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!done_) return false;
  *status = status_;
  *message = message_;
  return true;
}

chorus_status CoreRequest::Wait(int64_t timeout_ms, std::string* message) const {
  const bool forever = timeout_ms < 0 || timeout_ms >= kForeverMs;
  const auto start = std::chrono::steady_clock::now();
  if (progress_ != nullptr && progress_->spin().count() > 0 && timeout_ms != 0) {
    const auto spin_until =
        start + (forever ? progress_->spin()
                         : std::min<std::chrono::microseconds>(
                               progress_->spin(), std::chrono::milliseconds(timeout_ms)));
    while (!done_flag_.load(std::memory_order_acquire) && progress_->PollOnce() &&
           std::chrono::steady_clock::now() < spin_until) {
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (forever) {
    finished_.wait(lock, [&] { return done_; });
  } else if (!finished_.wait_until(lock, start + std::chrono::milliseconds(timeout_ms),
                                   [&] { return done_; })) {
    return CHORUS_TIMEOUT;
  }
  *message = message_;
  return status_;
}

chorus_request* NewRequestHandle(std::shared_ptr<CoreRequest> request) {
  auto* handle = new RequestHandle();
  handle->request = std::move(request);
  return reinterpret_cast<chorus_request*>(handle);
}

chorus_status CoreRequestTest(chorus_request* request, int* done) {
  chorus_status result = CHORUS_OK;
  const chorus_status guard = sdk::Guard([&] {
    if (done == nullptr) sdk::Fail(CHORUS_INVALID_ARGUMENT, "core request_test: done is NULL");
    *done = 0;
    CoreRequest& r = RequireRequest(request, "request_test");
    std::string message;
    if (!r.Test(&result, &message)) return;
    *done = 1;
    if (result != CHORUS_OK) sdk::SetError(result, message);
  });
  return guard != CHORUS_OK ? guard : result;
}

chorus_status CoreRequestWait(chorus_request* request, int64_t timeout_ms) {
  chorus_status result = CHORUS_OK;
  const chorus_status guard = sdk::Guard([&] {
    CoreRequest& r = RequireRequest(request, "request_wait");
    std::string message;
    result = r.Wait(timeout_ms, &message);
    if (result == CHORUS_TIMEOUT) {
      message = "core request_wait: the operation did not finish in " + std::to_string(timeout_ms) +
                " ms";
    }
    if (result != CHORUS_OK) sdk::SetError(result, message);
  });
  return guard != CHORUS_OK ? guard : result;
}

void CoreRequestFree(chorus_request* request) {
  auto* handle = reinterpret_cast<RequestHandle*>(request);
  if (handle == nullptr || handle->tag != RequestHandle::kTag) return;
  delete handle;
}

}  // namespace chorus::internal
