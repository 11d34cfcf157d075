// Long-lived candidate workers and the GPU gate that orders them. A worker process serves one
// evaluation after another (`kernelgate worker --serve`): its CUDA context, timer and the
// candidates' runtime are set up once, not per evaluation. Isolation holds per evaluation: a
// worker that crashes, hangs, hits a CUDA error, or whose candidate left threads or device memory
// behind is gone before the next evaluation, which gets a fresh process.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/process.h"

namespace kg {

struct worker_outcome {
  bool replied = false; // the worker finished the manifest: `code` is its answer
  int code = -1;        // 0 done, 2 bad manifest, 3 cannot load the candidate, 4 cannot write an
                        // output (the harness's fault), 5 CUDA error
  bool timed_out = false;
  // The worker never said it was ready (its CUDA context did not come up) within the start
  // limit: the harness's fault, never the candidate's (timed_out is false then).
  bool not_started = false;
  double start_limit_seconds = 0; // (what not_started waited)
  // The worker ended itself because a call ran past the manifest's trial_limit_seconds (exit
  // code 6, sandbox/worker.h): a hang at the trial after the last one in its result.
  bool trial_hung() const { return !replied && died.exited && died.exit_code == 6; }
  process_result died; // when it did not reply: how the process ended
  double seconds = 0;
  std::string describe() const; // "exit code 5", "killed by signal 11 (...)", "timed out ..."
  bool ok() const { return replied && code == 0; }
};

// The status waitpid will report for child `pid` once it is known, without reaping it: a
// zombie's, or that of a process still tearing down (the kernel sets it as the process begins to
// exit: /proc/PID/stat, field 52). nullopt while it runs, and for an exit code of 0.
std::optional<int> exit_status_now(int pid);

class worker_process {
public:
  // `argv`: the serve command without its two fd arguments (added here). `log`: the worker's
  // stdout and stderr, appended across its lifetimes.
  worker_process(std::vector<std::string> argv, std::filesystem::path log, process_limits limits);
  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  // Runs one manifest, starting a worker first if none is alive. Past `timeout_seconds` the
  // worker's whole process group is killed. A worker says "ready" once its CUDA context is up
  // (which can take many seconds while the GPU is busy): the run's clock starts then, and a
  // worker not ready within start_limit_seconds is killed and reported not_started. (A worker
  // that does not say it -- expect_ready(false), the default -- is timed from the request.)
  // Never throws for the worker's behaviour.
  worker_outcome run(const std::filesystem::path& manifest, double timeout_seconds);
  // What the worker logged during the last run() (at most `max_bytes`, the end of it).
  std::string last_log(std::size_t max_bytes = 600) const;
  int starts() const { return starts_; }
  // The workers kernelgate starts (kg_worker, `kernelgate worker`) say "ready"; `start_limit`
  // (at least the run's own timeout) bounds the wait for it.
  void expect_ready(bool on, double start_limit_seconds = 120) {
    expect_ready_ = on;
    start_limit_ = start_limit_seconds;
  }
  // The live worker's process id (-1: none; tests read /proc/PID/exe).
  int pid() const { return pid_; }
  // Start the next worker as soon as one ends (a crash, a hang, a recycle), so its process and
  // CUDA context are set up while the caller judges what the last one wrote; and leave the ended
  // one's teardown to a background reaper instead of waiting for it in run() (its exit status,
  // when the outcome needs it, is read as soon as the kernel sets it). Only where nothing is
  // timed: a context coming up or going down beside a timed kernel would disturb it (the audit,
  // not eval; without prestart, run() returns only once the ended worker is gone, inside the
  // caller's GPU gate).
  void set_prestart(bool on) { prestart_ = on; }

private:
  struct reaper; // worker_pool.cpp
  enum class status_of_ended { not_needed, wait, killed };
  void start();
  void stop(); // kills the group and reaps the process (and waits for the reaper)
  // After a worker ended: its fds closed, a successor started (prestart), reaped (prestart: in the
  // background). `died` gets its status when `need` says so: `wait` for it (it ended by itself),
  // or `killed` (SIGKILL sent: that unless it had ended already).
  void ended(status_of_ended need = status_of_ended::not_needed, process_result* died = nullptr);
  std::vector<std::string> argv_;
  std::filesystem::path log_;
  process_limits limits_;
  int pid_ = -1, request_fd_ = -1, reply_fd_ = -1;
  bool expect_ready_ = false;
  double start_limit_ = 120;
  bool ready_ = false;  // the current worker said "ready"
  std::string pending_; // what it wrote past its last line read
  std::uintmax_t log_from_ = 0;
  int starts_ = 0;
  bool prestart_ = false;
  std::unique_ptr<reaper> reaper_; // ended workers still tearing down (prestart only)
};

// Shared for correctness runs (several workers may check outputs at once), exclusive for timing
// (nothing else on the GPU while a candidate is timed). Waiting timers go first: new shared
// holders queue behind them, so timing is never starved by a stream of correctness runs.
class gpu_gate {
public:
  void lock_shared();
  void unlock_shared();
  void lock();
  void unlock();

private:
  std::mutex m_;
  std::condition_variable cv_;
  int readers_ = 0, writers_waiting_ = 0;
  bool writer_ = false;
};

} // namespace kg
