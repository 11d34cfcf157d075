// An ended worker's teardown leaves the critical path when workers are prestarted
// (sandbox/worker_pool.h), and no process outlives its worker_process.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "sandbox/process.h"
#include "sandbox/worker_pool.h"
#include "scratch_dir.h"

using namespace kg;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = test::scratch_dir("kg-worker-slim") / name;
  fs::create_directories(d);
  return d;
}

} // namespace

TEST(exit_status_now, reads_an_ended_childs_status_without_reaping_it_and_nothing_while_it_runs) {
  const pid_t live = ::fork();
  if (live == 0) {
    ::pause();
    ::_exit(0);
  }
  const pid_t done = ::fork();
  if (done == 0) ::_exit(6);
  EXPECT_FALSE(exit_status_now(live).has_value());
  std::optional<int> status;
  for (const auto end = clock_type::now() + 5s; !status && clock_type::now() < end;)
    status = exit_status_now(done);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 6);
  int st = 0;
  EXPECT_EQ(::waitpid(done, &st, 0), done); // still there to reap
  EXPECT_EQ(st, *status);
  ::kill(live, SIGKILL);
  status.reset();
  for (const auto end = clock_type::now() + 5s; !status && clock_type::now() < end;)
    status = exit_status_now(live);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
  EXPECT_EQ(::waitpid(live, &st, 0), live);
}

// A worker that says recycle and takes 1.5 s to go: with prestart, run() returns without waiting
// for it, its successor is already up, and the ended one is reaped in the background -- at the
// latest when the worker_process goes, which leaves no zombie behind.
TEST(worker_process_reaping, an_ended_worker_is_reaped_off_the_critical_path) {
  const auto d = scratch("reap");
  std::optional<worker_process> w;
  w.emplace(std::vector<std::string>{"bash", "-c",
                                     "read -r m <&3; echo '0 continue' >&4; read -r m <&3; "
                                     "echo '0 recycle' >&4; exec 3<&- 4>&-; sleep 1.5",
                                     "bash"},
            d / "w.log", process_limits{});
  w->set_prestart(true);
  ASSERT_TRUE(w->run("a.json", 5).ok());
  const int old = w->pid();
  ASSERT_GT(old, 0);
  const auto t0 = clock_type::now();
  const auto b = w->run("b.json", 5);
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  EXPECT_TRUE(b.ok());
  EXPECT_LT(s, 0.7) << "run() waited for the ended worker";
  EXPECT_EQ(w->starts(), 2);
  EXPECT_NE(w->pid(), old);
  EXPECT_EQ(::kill(old, 0), 0); // still tearing down
  w.reset();
  errno = 0;
  EXPECT_EQ(::kill(old, 0), -1); // reaped: not even a zombie
  EXPECT_EQ(errno, ESRCH);
}

TEST(worker_process_reaping, a_crash_reports_its_signal_with_the_successor_prestarted) {
  const auto d = scratch("crash");
  worker_process w({"bash", "-c", "read -r m <&3; kill -SEGV $$", "bash"}, d / "w.log", {});
  w.set_prestart(true);
  const auto a = w.run("m.json", 5);
  EXPECT_FALSE(a.replied);
  EXPECT_EQ(a.died.signal, 11) << a.describe();
  EXPECT_EQ(w.starts(), 2);
  EXPECT_GT(w.pid(), 0);
}

// A hang timed out under prestart: reported as killed at once, its group gone.
TEST(worker_process_reaping, a_timeout_under_prestart_is_reported_killed) {
  const auto d = scratch("hang");
  worker_process w({"bash", "-c", "read -r m <&3; sleep 60", "bash"}, d / "w.log", {});
  w.set_prestart(true);
  const auto a = w.run("m.json", 0.3);
  EXPECT_TRUE(a.timed_out);
  EXPECT_EQ(a.died.signal, SIGKILL);
  EXPECT_FALSE(a.trial_hung());
}
