// Long-lived workers and the GPU gate, with shell scripts standing in for `kernelgate worker
// --serve` (same protocol: a manifest path per line on fd 3, "CODE continue|recycle" on fd 4).
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "sandbox/worker_pool.h"
#include "sandbox/worker_set.h"

using namespace kg;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

fs::path scratch(const std::string& name) {
  // The process's own folder, removed when the test process ends: tests leave nothing in /tmp.
  static const struct root {
    fs::path p = fs::temp_directory_path() / ("kg-wp-" + std::to_string(::getpid()));
    ~root() { remove_tree(p); }
  } r;
  const fs::path d = r.p / name;
  remove_tree(d);
  fs::create_directories(d);
  return d;
}

// bash -c SCRIPT bash 3 4: the fds arrive as $1 and $2 (always 3 and 4).
worker_process serving(const std::string& script, const fs::path& log) {
  return worker_process({"bash", "-c", script, "bash"}, log, {});
}

} // namespace

TEST(worker_process, serves_many_manifests_in_one_process_and_logs_each_apart) {
  const auto d = scratch("serve");
  auto w = serving("while read -r m <&3; do echo \"saw $m pid $$\"; echo '0 continue' >&4; done",
                   d / "w.log");
  const auto a = w.run("first.json", 5);
  EXPECT_TRUE(a.ok()) << a.describe();
  EXPECT_NE(w.last_log().find("saw first.json"), std::string::npos);
  const auto b = w.run("second.json", 5);
  EXPECT_TRUE(b.ok()) << b.describe();
  EXPECT_EQ(w.starts(), 1);
  const auto log = w.last_log();
  EXPECT_NE(log.find("saw second.json"), std::string::npos);
  EXPECT_EQ(log.find("first.json"), std::string::npos) << log; // only this run's part
}

TEST(worker_process, a_crash_is_reported_with_its_signal_and_the_next_run_gets_a_fresh_worker) {
  const auto d = scratch("crash");
  auto w = serving("read -r m <&3; echo dying; kill -SEGV $$", d / "w.log");
  const auto a = w.run("m.json", 5);
  EXPECT_FALSE(a.replied);
  EXPECT_FALSE(a.timed_out);
  EXPECT_EQ(a.died.signal, 11);
  EXPECT_NE(a.describe().find("signal 11"), std::string::npos) << a.describe();
  EXPECT_NE(w.last_log().find("dying"), std::string::npos);
  (void)w.run("m.json", 5);
  EXPECT_EQ(w.starts(), 2);
}

TEST(worker_process, a_hang_times_out_within_its_limit_and_its_whole_group_is_killed) {
  const auto d = scratch("hang");
  const auto marker = d / "still_running";
  // The worker starts a grandchild that would touch a file after 2 s: killing only the worker
  // would leave it behind.
  auto w =
      serving("read -r m <&3; (sleep 2; touch " + marker.string() + ") & sleep 60", d / "w.log");
  const auto t0 = std::chrono::steady_clock::now();
  const auto a = w.run("m.json", 0.3);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(a.timed_out);
  EXPECT_FALSE(a.ok());
  EXPECT_GE(a.seconds, 0.3);
  EXPECT_LT(s, 1.5);
  std::this_thread::sleep_for(2500ms);
  EXPECT_FALSE(fs::exists(marker)) << "the worker's child survived the timeout";
}

TEST(worker_process, recycle_and_error_codes_end_the_session) {
  const auto d = scratch("recycle");
  auto w = serving("read -r m <&3; echo '5 recycle' >&4", d / "w.log");
  const auto a = w.run("m.json", 5);
  EXPECT_TRUE(a.replied);
  EXPECT_EQ(a.code, 5);
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.describe(), "exit code 5");
  const auto b = w.run("m.json", 5);
  EXPECT_EQ(b.code, 5);
  EXPECT_EQ(w.starts(), 2); // the first said recycle: a new process for the second
}

TEST(worker_process, a_worker_that_exits_between_runs_is_restarted) {
  const auto d = scratch("exit");
  auto w = serving("read -r m <&3; echo '0 continue' >&4; exit 0", d / "w.log");
  EXPECT_TRUE(w.run("a.json", 5).ok());
  // It said continue but exited: the next request finds the pipe closed, reports the exit, and
  // the one after that gets a fresh worker.
  const auto b = w.run("b.json", 5);
  EXPECT_FALSE(b.ok());
  EXPECT_TRUE(w.run("c.json", 5).ok());
  EXPECT_EQ(w.starts(), 2);
}

// Readers share, a writer excludes, and a waiting writer goes before readers that come later.
TEST(gpu_gate, timing_waits_for_checks_then_goes_before_later_checks) {
  gpu_gate g;
  std::atomic<int> order{0};
  std::atomic<int> writer_at{-1}, late_reader_at{-1};
  g.lock_shared(); // an early check
  g.lock_shared(); // a second one at the same time: shared
  std::jthread writer([&] {
    g.lock();
    writer_at = order++;
    std::this_thread::sleep_for(50ms);
    g.unlock();
  });
  std::this_thread::sleep_for(100ms); // the writer is waiting now
  std::jthread late([&] {
    g.lock_shared();
    late_reader_at = order++;
    g.unlock_shared();
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(writer_at.load(), -1);      // still held by the two early checks
  EXPECT_EQ(late_reader_at.load(), -1); // queued behind the waiting writer
  g.unlock_shared();
  g.unlock_shared();
  writer.join();
  late.join();
  EXPECT_EQ(writer_at.load(), 0);
  EXPECT_EQ(late_reader_at.load(), 1);
}

TEST(worker_set, a_thread_waits_for_a_free_worker_and_gets_the_one_given_back) {
  const auto d = scratch("set");
  worker_set set(2, [&](int n) {
    return std::make_unique<worker_process>(
        std::vector<std::string>{"bash", "-c",
                                 "while read -r m <&3; do echo \"ran $m\"; echo '0 continue' >&4; "
                                 "done",
                                 "bash"},
        d / ("w" + std::to_string(n) + ".log"), process_limits{});
  });
  EXPECT_EQ(set.size(), 2);
  std::optional<worker_set::lease> a(set.take()), b(set.take());
  EXPECT_NE(&**a, &**b); // two workers, one each
  const auto o = (*a)->run("m.json", 5);
  EXPECT_TRUE(o.ok()) << o.describe();
  EXPECT_NE((*a)->last_log().find("ran m.json"), std::string::npos);
  const worker_process* given_back = &**a;
  std::atomic<const worker_process*> third{nullptr};
  std::jthread t([&] {
    const auto c = set.take();
    third = &*c;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(third.load(), nullptr); // both taken: it waits
  a.reset();
  t.join();
  EXPECT_EQ(third.load(), given_back);
  EXPECT_EQ(set.starts(), 1); // workers start on their first run, not before
}

TEST(byte_budget, a_reservation_waits_until_it_fits_and_one_too_large_runs_alone) {
  byte_budget budget(100);
  std::optional<byte_budget::hold> first(budget.reserve(60));
  std::atomic<bool> second_in{false};
  std::jthread t([&] {
    const auto h = budget.reserve(50); // 60 + 50 > 100
    second_in = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(second_in.load());
  EXPECT_EQ(budget.held(), 60u);
  first.reset();
  t.join();
  EXPECT_TRUE(second_in.load());
  EXPECT_EQ(budget.held(), 0u);
  // Larger than the whole budget: it proceeds once nothing else is held, and holds others off.
  std::optional<byte_budget::hold> big(budget.reserve(500));
  std::atomic<bool> small_in{false};
  std::jthread u([&] {
    const auto h = budget.reserve(1);
    small_in = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(small_in.load());
  big.reset();
  u.join();
  EXPECT_TRUE(small_in.load());
}
