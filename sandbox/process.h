// Child processes for the parts of an evaluation that must not take kernelgate down with them:
// the compiler and the candidate worker. Each child gets its own process group (a timeout kills
// everything it started), its output in a log file, and optional resource limits.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace kg {

struct process_limits {
  double timeout_seconds = 60; // wall clock; then SIGKILL to the whole process group
  long cpu_seconds = 0;        // RLIMIT_CPU (0: none)
  long long file_bytes = 0;    // RLIMIT_FSIZE (0: none)
  long open_files = 0;         // RLIMIT_NOFILE (0: none)
};

struct process_result {
  int exit_code = -1; // valid when exited
  int signal = 0;     // the signal that ended it, 0 when it exited
  bool exited = false;
  bool timed_out = false;
  double seconds = 0;
  std::string describe() const; // "exit code 3", "killed by signal 11 (Segmentation fault)", ...
  // Ended by SIGTERM, SIGINT or SIGHUP, or a shell's 128+n for one of them: the signals a job
  // manager (Slurm's requeue and preemption, a Ctrl-C) sends to every process of a job, ours
  // included -- an end that may be ours being stopped rather than the child's own.
  bool ended_by_job_signal() const;
};

// Runs argv[0] (looked up on PATH) with stdout and stderr appended to `log`. Never throws for the
// child's behaviour; throws std::runtime_error only when the child cannot be started.
process_result run_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                           const process_limits& limits = {});

// The building blocks of run_process, for children that outlive one call (sandbox/worker_pool.h):
// starts argv in its own process group with stdin from /dev/null, stdout and stderr appended to
// `log`, the limits applied, and each pair (parent fd, child fd) of `fds` duplicated into the
// child.
int spawn_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                  const process_limits& limits, const std::vector<std::pair<int, int>>& fds);
// Fills exited/exit_code/signal from a waitpid status.
void describe_status(int status, process_result& r);

// The last `max_bytes` of a file (a log tail for error messages); "" when unreadable.
std::string file_tail(const std::filesystem::path& f, std::size_t max_bytes = 2000);

} // namespace kg
