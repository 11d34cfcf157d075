// The shell the workloads keep their background work in (suite/background_loop.h).
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "suite/background_loop.h"

using namespace kg;

// The body runs until stop(), then on_exit, once; stop() returns normally.
TEST(background_loop, runs_until_stopped_then_calls_on_exit_once) {
  std::atomic<long> turns{0};
  std::atomic<int> exits{0};
  background_loop loop(
      "counter",
      [&](const std::atomic<bool>& stopping) {
        while (!stopping.load())
          ++turns;
      },
      [&] { ++exits; });
  while (turns.load() < 1000)
    std::this_thread::yield();
  loop.stop();
  const long after = turns.load();
  EXPECT_GE(after, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(turns.load(), after); // nothing runs after stop()
  EXPECT_EQ(exits.load(), 1);
  EXPECT_NO_THROW(loop.stop()); // a second stop() is a no-op
}

// The body's exception ends the loop at once and comes back from stop(), named after the loop.
TEST(background_loop, a_failure_is_rethrown_by_stop_with_the_loops_name) {
  std::atomic<bool> exited{false};
  background_loop loop(
      "contention hog",
      [](const std::atomic<bool>&) { throw std::runtime_error("cudaErrorLaunchFailure"); },
      [&] { exited = true; });
  while (!exited.load())
    std::this_thread::yield();
  try {
    loop.stop();
    FAIL() << "stop() did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "contention hog: cudaErrorLaunchFailure");
  }
}

// A throw of something that is not a std::exception is kept too; the destructor alone stops a
// loop that is still running without throwing.
TEST(background_loop, other_throws_are_kept_and_the_destructor_joins_quietly) {
  {
    background_loop loop("x", [](const std::atomic<bool>&) { throw 7; });
    EXPECT_THROW(loop.stop(), std::runtime_error);
  }
  std::atomic<bool> started{false};
  {
    background_loop loop("y", [&](const std::atomic<bool>& stopping) {
      started = true;
      while (!stopping.load())
        std::this_thread::yield();
    });
    while (!started.load())
      std::this_thread::yield();
  } // ~background_loop: stops and joins
  SUCCEED();
}
