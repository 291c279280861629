// The core's helper pool: Run's work on helpers and on guests (threads that join while they
// would otherwise spin), every unit once, Run waiting for every thread inside the work.
#include "base/helper_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace chorus::internal {
namespace {

constexpr size_t kUnits = 1000;

// Work that hands out kUnits units from a shared counter and counts each one taken.
struct CountingWork {
  std::atomic<size_t> next{0};
  std::vector<std::atomic<int>> taken = std::vector<std::atomic<int>>(kUnits);
  std::atomic<int> entered{0};

  void TakeAll() {
    for (size_t i = next.fetch_add(1); i < kUnits; i = next.fetch_add(1)) taken[i].fetch_add(1);
  }
  void ExpectEveryUnitOnce() const {
    for (size_t i = 0; i < kUnits; ++i) ASSERT_EQ(taken[i].load(), 1) << "unit " << i;
  }
};

bool WaitFor(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(HelperPool, NoPublishedWorkMeansNoGuest) { EXPECT_FALSE(HelperPool::Get().JoinAsGuest()); }

TEST(HelperPool, OneThreadRunsEveryUnitOnTheCaller) {
  CountingWork w;
  const auto caller = std::this_thread::get_id();
  HelperPool::Get().Run(1, [&] {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    w.TakeAll();
  });
  w.ExpectEveryUnitOnce();
  EXPECT_FALSE(HelperPool::Get().JoinAsGuest());  // closed once Run returned
}

TEST(HelperPool, HelpersShareTheUnits) {
  for (unsigned threads : {2u, 3u, 8u}) {
    CountingWork w;
    HelperPool::Get().Run(threads, [&] {
      w.entered.fetch_add(1);
      w.TakeAll();
    });
    w.ExpectEveryUnitOnce();
    EXPECT_GE(w.entered.load(), 1);
    EXPECT_LE(w.entered.load(), static_cast<int>(threads));
  }
}

TEST(HelperPool, AGuestJoinsOnceAndRunWaitsForIt) {
  CountingWork w;
  std::atomic<bool> guest_inside{false};
  std::atomic<bool> guest_done{false};  // the guest's work body has returned
  std::atomic<bool> joined_again{true};
  const auto caller = std::this_thread::get_id();
  std::thread guest([&] { EXPECT_TRUE(WaitFor([&] { return HelperPool::Get().JoinAsGuest(); })); });
  HelperPool::Get().Run(1, [&] {
    // The guest may enter before the caller does: tell them apart by thread.
    w.entered.fetch_add(1);
    const bool is_guest = std::this_thread::get_id() != caller;
    if (is_guest) {
      guest_inside = true;
      // Inside the work, the same generation is not entered twice.
      joined_again = HelperPool::Get().JoinAsGuest();
      // Give the caller time to finish its units and reach its wait.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } else {
      // Nor does Run's caller enter its own work a second time as a guest.
      EXPECT_FALSE(HelperPool::Get().JoinAsGuest());
      // The caller waits for the guest, so that both are inside at once.
      ASSERT_TRUE(WaitFor([&] { return guest_inside.load(); }));
    }
    w.TakeAll();
    if (is_guest) guest_done = true;
  });
  // Run returned only after the guest left the work (it slept 50 ms in it, past the caller's
  // 30 us spin, so this fails if Run does not wait for its guests).
  EXPECT_TRUE(guest_done.load());
  EXPECT_EQ(w.entered.load(), 2);
  guest.join();
  EXPECT_FALSE(joined_again.load());
  w.ExpectEveryUnitOnce();
}

TEST(HelperPool, ALoopWithoutHelpersDoesNotWaitForAnotherCallersLoop) {
  std::atomic<bool> other_returned{false};
  std::atomic<bool> holding{false};
  std::thread holder([&] {
    HelperPool::Get().Run(1, [&] {
      holding = true;
      // Holds the pool until the other caller's loop has run and returned (at most 10 s).
      EXPECT_TRUE(WaitFor([&] { return other_returned.load(); }));
    });
  });
  ASSERT_TRUE(WaitFor([&] { return holding.load(); }));
  CountingWork w;
  HelperPool::Get().Run(1, [&] { w.TakeAll(); });
  other_returned = true;
  holder.join();
  w.ExpectEveryUnitOnce();
}

}  // namespace
}  // namespace chorus::internal
