#include "sandbox/process.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "timing/interrupt.h"

namespace kg {

bool process_result::ended_by_job_signal() const {
  const auto job_signal = [](int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP; };
  if (timed_out) return false; // our own SIGKILL
  return exited ? exit_code > 128 && job_signal(exit_code - 128) : job_signal(signal);
}

std::string process_result::describe() const {
  if (timed_out) return "timed out after " + std::to_string(seconds) + " s";
  if (exited) return "exit code " + std::to_string(exit_code);
  return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
}

int spawn_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                  const process_limits& limits, const std::vector<std::pair<int, int>>& fds) {
  if (argv.empty()) throw std::runtime_error("spawn_process: empty command");
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open log " + log.string() + ": " + strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw std::runtime_error(std::string("fork failed: ") + strerror(errno));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const auto& [from, to] : fds)
      ::dup2(from, to); // dup2 clears close-on-exec on the copy
    auto lim = [](int what, rlim_t v) {
      if (v == 0) return;
      rlimit r{v, v};
      ::setrlimit(what, &r);
    };
    lim(RLIMIT_CPU, static_cast<rlim_t>(limits.cpu_seconds));
    lim(RLIMIT_FSIZE, static_cast<rlim_t>(limits.file_bytes));
    lim(RLIMIT_NOFILE, static_cast<rlim_t>(limits.open_files));
    rlimit core{0, 0}; // a crashing candidate leaves no core file behind
    ::setrlimit(RLIMIT_CORE, &core);
    ::execvp(args[0], args.data());
    const char msg[] = "exec failed\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(fd);
  ::setpgid(pid, pid); // also from the parent: whichever runs first wins, both agree
  return pid;
}

void describe_status(int status, process_result& r) {
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
}

namespace {
// Slurm signals a job's processes together; our handler runs within milliseconds.
constexpr std::chrono::milliseconds job_signal_grace{2000};
} // namespace

process_result run_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                           const process_limits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = spawn_process(argv, log, limits, {});
  process_result r;
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (w == pid) break;
    if (w < 0 && errno != EINTR)
      throw std::runtime_error(std::string("waitpid: ") + strerror(errno));
    if (r.seconds > limits.timeout_seconds) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(-pid, SIGKILL); // anything the child left running in its group
  describe_status(status, r);
  // The job manager signals every process of a job in no set order: a child may die of it
  // before our own handler has run. Give the handler that moment, so that callers checking
  // stop_requested() next see the stop rather than a failure of the child.
  if (r.ended_by_job_signal()) stop_requested_within(job_signal_grace);
  return r;
}

std::string file_tail(const std::filesystem::path& f, std::size_t max_bytes) {
  std::ifstream in(f, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(in.tellg());
  const std::size_t from = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(from));
  std::string s(size - from, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

} // namespace kg
