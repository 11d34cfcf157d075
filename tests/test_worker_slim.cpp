// The slim worker `kg_worker` (sandbox/worker_main.cpp): the sandbox starts it when it sits beside
// kernelgate and falls back to `kernelgate worker` otherwise (suite/worker_paths.h); and an ended
// worker's teardown leaves the critical path when workers are prestarted (sandbox/worker_pool.h).
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "sandbox/process.h"
#include "sandbox/sandbox.h"
#include "sandbox/worker_pool.h"
#include "sandbox/worker_torch.h"
#include "scratch_dir.h"
#include "suite/worker_paths.h"

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

// The executable process `pid` runs, once it has exec'd (a fresh fork shows its parent's).
fs::path exe_of(int pid) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const auto end = clock_type::now() + 10s;
  std::error_code ec;
  fs::path exe;
  do {
    exe = fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
    if (!ec && exe != self) return exe;
    std::this_thread::sleep_for(2ms);
  } while (clock_type::now() < end);
  return exe;
}

// A manifest every worker answers at once: its candidate does not exist (code 3 on a GPU machine)
// or there is no CUDA device (code 5); either way the worker replies and recycles.
fs::path missing_candidate_manifest(const fs::path& d) {
  const fs::path m = d / "m.json";
  std::ofstream(m) << R"({"shared_object": ")" << (d / "missing.so").string() << R"(", "result": ")"
                   << (d / "result.json").string() << R"(", "trials": []})"
                   << "\n";
  return m;
}

void expect_worker_answers(worker_process& w, const fs::path& manifest) {
  const auto o = w.run(manifest, 60);
  EXPECT_TRUE(o.replied) << o.describe() << "\n" << w.last_log();
  EXPECT_TRUE(o.code == 3 || o.code == 5) << o.code << "\n" << w.last_log();
}

} // namespace

TEST(worker_binary, the_slim_worker_is_built_beside_kernelgate_and_chosen) {
  EXPECT_EQ(fs::path(KG_WORKER_BIN).parent_path(), fs::path(KG_KERNELGATE_BIN).parent_path());
  EXPECT_EQ(worker_binary_beside(KG_KERNELGATE_BIN), fs::path(KG_WORKER_BIN));
}

TEST(worker_binary, falls_back_to_the_binary_itself_without_an_executable_kg_worker) {
  const auto d = scratch("beside");
  const fs::path self = d / "kernelgate";
  std::ofstream(self) << "#!/bin/sh\n";
  EXPECT_EQ(worker_binary_beside(self), self); // none
  std::ofstream(d / "kg_worker") << "#!/bin/sh\n";
  fs::permissions(d / "kg_worker", fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(worker_binary_beside(self), self); // not executable
  fs::create_directory(d / "dir");
  EXPECT_EQ(worker_binary_beside(d / "dir" / "kernelgate"), d / "dir" / "kernelgate");
  fs::permissions(d / "kg_worker", fs::perms::owner_all);
  EXPECT_EQ(worker_binary_beside(self), d / "kg_worker");
}

TEST(worker_binary, kg_worker_takes_kernelgate_workers_arguments) {
  const auto d = scratch("args");
  EXPECT_EQ(run_process({KG_WORKER_BIN}, d / "log").exit_code, 2);
  EXPECT_EQ(run_process({KG_WORKER_BIN, "worker", "--serve", "x", "4"}, d / "log").exit_code, 2);
  // A manifest that is not there: code 2, with or without the leading "worker".
  EXPECT_EQ(run_process({KG_WORKER_BIN, "worker", (d / "none.json").string()}, d / "log").exit_code,
            2);
  EXPECT_EQ(run_process({KG_WORKER_BIN, (d / "none.json").string()}, d / "log").exit_code, 2);
}

// KERNELGATE_WORKER_SYNC (sandbox/worker_sync.h, set by the audit): a name the worker does not
// know ends it before any CUDA call with code 5 and one line naming the value; a known one is
// applied, and the run goes on (the missing candidate: code 3 on a GPU machine, 5 without a GPU).
TEST(worker_binary, kg_worker_reads_its_sync_mode_from_the_environment) {
  const auto d = scratch("sync");
  const auto m = missing_candidate_manifest(d).string();
  const auto log_of = [](const fs::path& f) {
    std::ifstream in(f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ::setenv("KERNELGATE_WORKER_SYNC", "sometimes", 1);
  EXPECT_EQ(run_process({KG_WORKER_BIN, m}, d / "bad.log").exit_code, 5);
  EXPECT_NE(log_of(d / "bad.log").find("KERNELGATE_WORKER_SYNC='sometimes'"), std::string::npos)
      << log_of(d / "bad.log");
  for (const char* mode : {"block", "spin", "yield", "auto"}) {
    ::setenv("KERNELGATE_WORKER_SYNC", mode, 1);
    const int code = run_process({KG_WORKER_BIN, m}, d / "ok.log").exit_code;
    EXPECT_TRUE(code == 3 || code == 5) << mode << ": " << code;
    EXPECT_EQ(log_of(d / "ok.log").find("KERNELGATE_WORKER_SYNC"), std::string::npos)
        << mode << ": " << log_of(d / "ok.log");
  }
  ::unsetenv("KERNELGATE_WORKER_SYNC");
}

// What the sandbox does (worker_command of worker_binary's choice): the process that serves is
// kg_worker itself, and it answers the pool's protocol.
TEST(worker_binary, the_sandbox_launches_kg_worker_when_it_is_there) {
  const auto d = scratch("launch-slim");
  worker_process w(worker_command(worker_binary_beside(KG_KERNELGATE_BIN)), d / "w.log",
                   worker_limits());
  w.set_prestart(true);
  expect_worker_answers(w, missing_candidate_manifest(d));
  ASSERT_GT(w.pid(), 0); // the successor, prestarted after the recycle
  EXPECT_EQ(exe_of(w.pid()), fs::canonical(KG_WORKER_BIN));
  expect_worker_answers(w, missing_candidate_manifest(d));
}

// Without kg_worker beside it (here: a link to kernelgate in a folder of its own), the full
// binary serves as `kernelgate worker --serve`.
TEST(worker_binary, the_sandbox_falls_back_to_kernelgate_worker) {
  const auto d = scratch("launch-full");
  fs::create_symlink(KG_KERNELGATE_BIN, d / "kernelgate");
  const auto exe = worker_binary_beside(d / "kernelgate");
  ASSERT_EQ(exe, d / "kernelgate");
  worker_process w(worker_command(exe), d / "w.log", worker_limits());
  w.set_prestart(true);
  expect_worker_answers(w, missing_candidate_manifest(d));
  ASSERT_GT(w.pid(), 0);
  EXPECT_EQ(exe_of(w.pid()), fs::canonical(KG_KERNELGATE_BIN));
}

// kg_worker's LibTorch reference: the plugin beside it loads (every symbol resolved) and answers
// through its one entry point; it never runs here (no GPU, or a CPU-only LibTorch).
TEST(worker_binary, the_libtorch_plugin_loads_and_answers) {
  const fs::path plugin = fs::path(KG_WORKER_BIN).parent_path() / KG_WORKER_TORCH_PLUGIN;
  void* h = ::dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  const auto fn = reinterpret_cast<worker_torch_plugin_fn>(::dlsym(h, worker_torch_plugin_symbol));
  ASSERT_NE(fn, nullptr);
  const nlohmann::json params = nlohmann::json::object();
  torch_cuda_reference r;
  const std::string op = "no_such_op";
  fn(op.data(), op.size(), &params, nullptr, 0, &r);
  EXPECT_FALSE(r.run);
  EXPECT_NE(r.error.find("no LibTorch reference for op 'no_such_op'"), std::string::npos)
      << r.error;
  // (kept loaded: LibTorch does not expect to be unloaded)
}

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

// The ready handshake (worker_process::expect_ready): a worker whose context takes 1.5 s to come
// up is timed from its "ready", so a 1 s run that it answers in 0.2 s is not a timeout; one that
// never says ready is not_started at the start limit, described as such, never timed_out (the
// candidate is not blamed for a context that did not come up).
TEST(worker_process_ready, the_run_is_timed_from_the_workers_ready) {
  const auto d = scratch("ready");
  worker_process w({"bash", "-c",
                    "sleep 1.5; echo ready >&4; read -r m <&3; sleep 0.2; echo '0 continue' >&4; "
                    "read -r m <&3",
                    "bash"},
                   d / "w.log", {});
  w.expect_ready(true, 10);
  const auto a = w.run("a.json", 1.0);
  EXPECT_TRUE(a.ok()) << a.describe();
  EXPECT_LT(a.seconds, 1.0); // from the ready line, not from the request
  worker_process never({"bash", "-c", "sleep 60", "bash"}, d / "n.log", {});
  never.expect_ready(true, 1.5);
  const auto t0 = clock_type::now();
  const auto b = never.run("b.json", 0.5);
  EXPECT_TRUE(b.not_started);
  EXPECT_FALSE(b.timed_out);
  EXPECT_FALSE(b.replied);
  EXPECT_NE(b.describe().find("did not come up within 1 s"), std::string::npos) << b.describe();
  EXPECT_LT(std::chrono::duration<double>(clock_type::now() - t0).count(), 5.0);
  // Without expect_ready the same slow start counts against the run, as before.
  worker_process plain({"bash", "-c", "sleep 1.5; read -r m <&3; echo '0 continue' >&4", "bash"},
                       d / "p.log", {});
  EXPECT_TRUE(plain.run("c.json", 1.0).timed_out);
}
