// The builtin plugin's request with a CallerProgress: a wait polls on the caller's thread for the
// spin (longer while the polls move data), then sleeps until Complete; the progress thread is told
// to stand back while a wait spins and for the hand-over after, and woken when a wait sleeps; a
// detached progress is never run again; time-outs hold.
#include "builtin/core_request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace chorus::internal {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A poll that only counts its calls and says it moved nothing.
std::function<bool()> CountPolls(std::atomic<int>& polls) {
  return [&polls] {
    ++polls;
    return false;
  };
}

TEST(CoreRequest, AWaitCompletesThroughTheCallersOwnPolls) {
  std::atomic<int> polls{0};
  std::shared_ptr<CoreRequest> request;
  auto progress = std::make_shared<CallerProgress>(
      [&] {
        if (++polls == 3) request->Complete(CHORUS_OK);
        return false;
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
  auto progress = std::make_shared<CallerProgress>(CountPolls(polls), microseconds(50));
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
  auto progress = std::make_shared<CallerProgress>(CountPolls(polls), std::chrono::seconds(10));
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
  auto progress = std::make_shared<CallerProgress>(CountPolls(polls), microseconds(50));
  CoreRequest request(progress);
  std::string message;
  EXPECT_EQ(request.Wait(0, &message), CHORUS_TIMEOUT);
  EXPECT_EQ(polls.load(), 0);
  progress->Detach();
}

TEST(CoreRequest, ADetachedProgressIsNeverPolledAgain) {
  std::atomic<int> polls{0};
  auto progress = std::make_shared<CallerProgress>(CountPolls(polls), microseconds(50));
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
        return false;
      },
      microseconds(50));
  std::thread poller([&] { progress->PollOnce(); });
  while (!in_poll.load()) std::this_thread::yield();
  progress->Detach();
  EXPECT_TRUE(poll_ended.load());  // the endpoint may go away once Detach returned
  poller.join();
}

// Every poll takes 100 us and moves data, against a spin of 200 us: the spin lasts until the 10th
// poll completes the request (had it ended 200 us after the start, nothing would complete it).
TEST(CoreRequest, TheSpinLastsWhileThePollsMoveData) {
  std::atomic<int> polls{0};
  std::shared_ptr<CoreRequest> request;
  auto progress = std::make_shared<CallerProgress>(
      [&] {
        std::this_thread::sleep_for(microseconds(100));
        if (++polls == 10) request->Complete(CHORUS_OK);
        return true;
      },
      microseconds(200));
  request = std::make_shared<CoreRequest>(progress);
  std::string message;
  EXPECT_EQ(request->Wait(10000, &message), CHORUS_OK);
  EXPECT_EQ(polls.load(), 10);
  progress->Detach();
}

TEST(CoreRequest, TheProgressThreadStandsBackWhileAWaitSpinsAndForTheHandOver) {
  std::atomic<int> wakes{0};
  std::atomic<bool> stood_back_in_poll{false};
  std::shared_ptr<CallerProgress> progress;
  std::shared_ptr<CoreRequest> request;
  progress = std::make_shared<CallerProgress>(
      [&] {
        stood_back_in_poll = progress->ProgressThreadStandsBack();
        request->Complete(CHORUS_OK);
        return true;
      },
      microseconds(50), [&] { ++wakes; });
  EXPECT_FALSE(progress->ProgressThreadStandsBack());
  request = std::make_shared<CoreRequest>(progress);
  std::string message;
  const auto got = std::chrono::steady_clock::now();
  EXPECT_EQ(request->Wait(10000, &message), CHORUS_OK);
  EXPECT_TRUE(stood_back_in_poll.load());
  const bool standing_back = progress->ProgressThreadStandsBack();
  if (std::chrono::steady_clock::now() - got < CallerProgress::kHandOver / 2) {
    EXPECT_TRUE(standing_back);  // a loop's next wait is about to spin again
  }
  std::this_thread::sleep_for(CallerProgress::kHandOver * 5);
  EXPECT_FALSE(progress->ProgressThreadStandsBack());
  EXPECT_EQ(wakes.load(), 0);  // the spin got its request: nobody sleeps
  progress->Detach();
}

// A spin that ends without its request, and a wait of a request that does not spin after a spin
// that got its own, both wake the progress thread and end its standing back at once.
TEST(CoreRequest, AWaitThatSleepsHandsTheSocketsBack) {
  std::atomic<int> wakes{0};
  std::shared_ptr<CoreRequest> quick;
  auto progress = std::make_shared<CallerProgress>(
      [&] {
        if (quick != nullptr) quick->Complete(CHORUS_OK);
        return false;
      },
      microseconds(50), [&] { ++wakes; });
  std::string message;
  CoreRequest silent(progress);
  EXPECT_EQ(silent.Wait(20, &message), CHORUS_TIMEOUT);
  EXPECT_EQ(wakes.load(), 1);
  EXPECT_FALSE(progress->ProgressThreadStandsBack());

  quick = std::make_shared<CoreRequest>(progress);
  EXPECT_EQ(quick->Wait(10000, &message), CHORUS_OK);
  quick = nullptr;
  CoreRequest large(progress, /*spin=*/false);
  EXPECT_EQ(large.Wait(20, &message), CHORUS_TIMEOUT);
  EXPECT_EQ(wakes.load(), 2);
  EXPECT_FALSE(progress->ProgressThreadStandsBack());
  progress->Detach();
  CoreRequest after(progress);
  EXPECT_EQ(after.Wait(5, &message), CHORUS_TIMEOUT);  // detached: no wake reaches the owner
  EXPECT_EQ(wakes.load(), 2);
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
