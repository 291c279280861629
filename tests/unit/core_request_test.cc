// The builtin plugin's request with a CallerProgress: a wait polls on the caller's thread for the
// spin, then sleeps until Complete; a detached progress is never run again; time-outs hold.
#include "builtin/core_request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace chorus::internal {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(CoreRequest, AWaitCompletesThroughTheCallersOwnPolls) {
  std::atomic<int> polls{0};
  std::shared_ptr<CoreRequest> request;
  auto progress = std::make_shared<CallerProgress>(
      [&] {
        if (++polls == 3) request->Complete(CHORUS_OK);
      },
      std::chrono::seconds(10));  // a spin far longer than the test: only the polls can end it
  request = std::make_shared<CoreRequest>(progress);
  std::string message;
  EXPECT_EQ(request->Wait(10000, &message), CHORUS_OK);
  EXPECT_EQ(polls.load(), 3);
  progress->Detach();
}

TEST(CoreRequest, AfterTheSpinAWaitSleepsUntilComplete) {
  std::atomic<int> polls{0};
  auto progress = std::make_shared<CallerProgress>([&] { ++polls; }, microseconds(50));
  auto request = std::make_shared<CoreRequest>(progress);
  std::thread finisher([&] {
    std::this_thread::sleep_for(milliseconds(30));
    request->Complete(CHORUS_PEER_LOST, "gone");
  });
  std::string message;
  EXPECT_EQ(request->Wait(10000, &message), CHORUS_PEER_LOST);
  EXPECT_EQ(message, "gone");
  EXPECT_GT(polls.load(), 0);
  finisher.join();
  progress->Detach();
}

TEST(CoreRequest, ATimeOutHoldsWithASpinLongerThanIt) {
  std::atomic<int> polls{0};
  auto progress = std::make_shared<CallerProgress>([&] { ++polls; }, std::chrono::seconds(10));
  CoreRequest request(progress);
  std::string message;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(request.Wait(20, &message), CHORUS_TIMEOUT);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_GT(polls.load(), 0);
  EXPECT_EQ(request.Wait(0, &message), CHORUS_TIMEOUT);  // still live
  progress->Detach();
}

TEST(CoreRequest, AZeroTimeOutDoesNotPoll) {
  std::atomic<int> polls{0};
  auto progress = std::make_shared<CallerProgress>([&] { ++polls; }, microseconds(50));
  CoreRequest request(progress);
  std::string message;
  EXPECT_EQ(request.Wait(0, &message), CHORUS_TIMEOUT);
  EXPECT_EQ(polls.load(), 0);
  progress->Detach();
}

TEST(CoreRequest, ADetachedProgressIsNeverPolledAgain) {
  std::atomic<int> polls{0};
  auto progress = std::make_shared<CallerProgress>([&] { ++polls; }, microseconds(50));
  EXPECT_TRUE(progress->PollOnce());
  EXPECT_EQ(polls.load(), 1);
  progress->Detach();
  EXPECT_FALSE(progress->PollOnce());
  CoreRequest request(progress);
  std::string message;
  EXPECT_EQ(request.Wait(20, &message), CHORUS_TIMEOUT);
  EXPECT_EQ(polls.load(), 1);
}

TEST(CoreRequest, DetachWaitsForAPollInFlight) {
  std::atomic<bool> in_poll{false}, poll_ended{false};
  auto progress = std::make_shared<CallerProgress>(
      [&] {
        in_poll = true;
        std::this_thread::sleep_for(milliseconds(50));
        poll_ended = true;
      },
      microseconds(50));
  std::thread poller([&] { progress->PollOnce(); });
  while (!in_poll.load()) std::this_thread::yield();
  progress->Detach();
  EXPECT_TRUE(poll_ended.load());  // the endpoint may go away once Detach returned
  poller.join();
}

TEST(CoreRequest, WithoutProgressAWaitJustSleeps) {
  auto request = std::make_shared<CoreRequest>();
  std::thread finisher([&] {
    std::this_thread::sleep_for(milliseconds(10));
    request->Complete(CHORUS_OK);
  });
  std::string message;
  EXPECT_EQ(request->Wait(-1, &message), CHORUS_OK);
  finisher.join();
}

}  // namespace
}  // namespace chorus::internal
