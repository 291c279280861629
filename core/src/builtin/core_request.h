// The builtin plugin's request (plugin.h's chorus_request): one operation in flight, such as a
// send or receive of the core's tcp transport. Whoever finishes the operation completes it once
// (the endpoint's progress thread, or abort); the caller tests or waits on it through the
// builtin plugin table's request_test / request_wait and frees it with request_free.
//
// Shared ownership: the handle given across the ABI holds one reference and the endpoint holds
// another while the operation is pending, so freeing the handle of an aborted request, or
// destroying the endpoint before the handle is freed, never leaves either side with a dangling
// pointer.
#ifndef CHORUS_CORE_CORE_REQUEST_H_
#define CHORUS_CORE_CORE_REQUEST_H_

#include <chorus/plugin.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace chorus::internal {

class CoreRequest {
 public:
  // Finishes the operation with `status`; the first call wins and later ones are ignored (an
  // abort racing a completion). Never blocks on anything but the request's own mutex.
  void Complete(chorus_status status, std::string message = {});

  // True when finished; then *status and *message hold the outcome.
  bool Test(chorus_status* status, std::string* message) const;

  // Waits up to timeout_ms (negative: no limit). CHORUS_TIMEOUT when still pending (the
  // operation stays live), else the operation's status with *message set.
  chorus_status Wait(int64_t timeout_ms, std::string* message) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool done_ = false;
  chorus_status status_ = CHORUS_OK;
  std::string message_;
};

// A new handle owning one reference to `request`, for returning across the ABI.
chorus_request* NewRequestHandle(std::shared_ptr<CoreRequest> request);

// The builtin plugin table's request functions (plugin.h semantics; errors through
// sdk::LastError()).
chorus_status CoreRequestTest(chorus_request* request, int* done);
chorus_status CoreRequestWait(chorus_request* request, int64_t timeout_ms);
void CoreRequestFree(chorus_request* request);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_CORE_REQUEST_H_
