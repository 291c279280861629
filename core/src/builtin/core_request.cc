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

bool CallerProgress::PollOnce(bool* moved) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (!poll_) return false;
  const bool did = poll_();
  if (moved != nullptr) *moved = did;
  return true;
}

void CallerProgress::Detach() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  poll_ = nullptr;
  wake_ = nullptr;
}

void CallerProgress::BeginSpin() { spinning_.fetch_add(1); }

void CallerProgress::EndSpin(bool got_request) {
  const bool last = spinning_.fetch_sub(1) == 1;
  if (got_request) {
    hand_over_.Mark();
  } else if (last) {
    // The wait sleeps now: the progress thread takes the sockets at once.
    hand_over_.Clear();
    WakeOwner();
  }
}

void CallerProgress::WaitSleeps() {
  if (hand_over_.Clear() && spinning_.load(std::memory_order_relaxed) == 0) WakeOwner();
}

bool CallerProgress::ProgressThreadStandsBack() const {
  return spinning_.load(std::memory_order_relaxed) > 0 || hand_over_.Recent();
}

void CallerProgress::WakeOwner() {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (wake_) wake_();
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
  if (progress_ != nullptr && spin_ && progress_->spin().count() > 0 && timeout_ms != 0) {
    // The spin lasts while the polls move data: it ends spin() after the last one that did (a
    // message streaming in keeps the wait on the core, a silent peer does not), and at the
    // time-out.
    const auto limit = forever ? std::chrono::steady_clock::time_point::max()
                               : start + std::chrono::milliseconds(timeout_ms);
    auto spin_until = std::min(start + progress_->spin(), limit);
    progress_->BeginSpin();
    bool moved = false;
    while (!done_flag_.load(std::memory_order_acquire) && progress_->PollOnce(&moved)) {
      const auto now = std::chrono::steady_clock::now();
      if (moved) {
        spin_until = std::min(now + progress_->spin(), limit);
      } else if (now >= spin_until) {
        break;
      }
    }
    progress_->EndSpin(done_flag_.load(std::memory_order_acquire));
  } else if (progress_ != nullptr && timeout_ms != 0 &&
             !done_flag_.load(std::memory_order_acquire)) {
    progress_->WaitSleeps();
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
