#include "sandbox/worker_pool.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kg {
namespace {

using clock_type = std::chrono::steady_clock;

// A pipe end moved to fd >= 10, close-on-exec: the child's dup2 onto 3 and 4 cannot clobber it.
int high_fd(int fd) {
  const int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  if (h < 0) throw std::runtime_error(std::string("fcntl: ") + strerror(errno));
  return h;
}

// Whether child `pid` has ended (a zombie; or gone already), without reaping it: while it is a
// zombie its id cannot be reused, so killing its group afterwards cannot hit a stranger's.
bool has_ended(int pid) {
  siginfo_t si{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) != 0)
    return errno == ECHILD;
  return si.si_pid == pid;
}

// Kills what is left of `pid`'s group, then reaps it (blocking). Its waitpid status (0 when it is
// no child of ours any more: reaped elsewhere, its id maybe another's, so nothing is killed).
int kill_and_reap(int pid) {
  siginfo_t si{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) != 0 &&
      errno == ECHILD)
    return 0;
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Reaps `pid` (waiting up to `grace` for it to end by itself), then kills what is left of its
// group.
process_result reap(int pid, std::chrono::milliseconds grace) {
  const auto end = clock_type::now() + grace;
  while (!has_ended(pid) && clock_type::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  process_result r;
  describe_status(kill_and_reap(pid), r);
  return r;
}

} // namespace

// The status waitpid will report for child `pid`, as soon as it is known: a zombie's, or that of
// one still tearing down (the kernel sets a task's exit code as it begins to exit, before it closes
// its files and releases its GPU context: /proc/PID/stat's 52nd field, Linux 3.5+). Nothing while
// it runs -- nor for an exit code of 0, which the field cannot tell from "still running".
std::optional<int> exit_status_now(int pid) {
  siginfo_t si{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
      si.si_pid == pid) {
    if (si.si_code == CLD_EXITED) return (si.si_status & 0xff) << 8;
    return si.si_status | (si.si_code == CLD_DUMPED ? 0x80 : 0);
  }
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  const auto paren = stat.rfind(')'); // the name (field 2) may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  for (int k = 3; k <= 52 && fields >> field; ++k)
    if (k == 52) {
      const int code = std::atoi(field.c_str());
      if (code != 0) return code;
    }
  return std::nullopt;
}

// Ended workers whose teardown (the process's exit, its CUDA context's release) goes on beside
// the next candidate: a thread polls each until it has ended, then kills what is left of its group
// and reaps it; one still there at its deadline is killed. Its destructor waits for every one
// (each until its deadline at most): no zombie and no process outlives the worker_process.
struct worker_process::reaper {
  struct entry {
    int pid;
    clock_type::time_point deadline;
  };
  std::mutex m;
  std::condition_variable_any cv;
  std::vector<entry> pending;
  std::jthread thread; // last: stopped and joined before the members it uses go

  void add(int pid, std::chrono::milliseconds grace) {
    {
      std::lock_guard<std::mutex> l(m);
      pending.push_back({pid, clock_type::now() + grace});
    }
    if (!thread.joinable()) thread = std::jthread([this](std::stop_token st) { loop(st); });
    cv.notify_one();
  }

  void loop(std::stop_token st) {
    std::unique_lock<std::mutex> l(m);
    for (;;) {
      if (pending.empty()) {
        if (st.stop_requested()) return; // only once every one is reaped
        cv.wait(l, st, [&] { return !pending.empty(); });
        continue;
      }
      const auto now = clock_type::now();
      std::vector<entry> look = pending;
      l.unlock();
      std::vector<int> done;
      for (const auto& e : look)
        if (has_ended(e.pid) || now >= e.deadline) {
          (void)kill_and_reap(e.pid);
          done.push_back(e.pid);
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      l.lock();
      std::erase_if(pending, [&](const entry& e) {
        return std::find(done.begin(), done.end(), e.pid) != done.end();
      });
    }
  }

  ~reaper() {
    if (!thread.joinable()) return;
    thread.request_stop();
    cv.notify_all();
    thread.join();
  }
};

std::string worker_outcome::describe() const {
  if (timed_out) return "timed out after " + std::to_string(seconds) + " s";
  if (not_started)
    return "did not come up within " + std::to_string(static_cast<int>(start_limit_seconds)) +
           " s (no CUDA context)";
  if (replied) return code == 0 ? "done" : "exit code " + std::to_string(code);
  return died.describe();
}

worker_process::worker_process(std::vector<std::string> argv, std::filesystem::path log,
                               process_limits limits)
    : argv_(std::move(argv)), log_(std::move(log)), limits_(limits) {
  // A worker that dies between two requests closes its end of the request pipe: writing to it
  // must be an error to handle here, not a signal that ends kernelgate.
  std::signal(SIGPIPE, SIG_IGN);
}

worker_process::~worker_process() {
  stop();
}

void worker_process::start() {
  int req[2], rep[2];
  if (::pipe2(req, O_CLOEXEC) != 0 || ::pipe2(rep, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  for (int* p : {&req[0], &req[1], &rep[0], &rep[1]})
    *p = high_fd(*p);
  auto argv = argv_;
  argv.push_back("3");
  argv.push_back("4");
  try {
    pid_ = spawn_process(argv, log_, limits_, {{req[0], 3}, {rep[1], 4}});
  } catch (...) {
    for (int fd : {req[0], req[1], rep[0], rep[1]})
      ::close(fd);
    throw;
  }
  ::close(req[0]);
  ::close(rep[1]);
  request_fd_ = req[1];
  reply_fd_ = rep[0];
  ready_ = false;
  pending_.clear();
  ++starts_;
}

void worker_process::stop() {
  if (request_fd_ >= 0) ::close(request_fd_); // end of requests: a live worker exits
  if (reply_fd_ >= 0) ::close(reply_fd_);
  request_fd_ = reply_fd_ = -1;
  if (pid_ > 0) (void)reap(pid_, std::chrono::milliseconds(2000));
  pid_ = -1;
  reaper_.reset(); // waits for the ended workers still tearing down
}

worker_outcome worker_process::run(const std::filesystem::path& manifest, double timeout_seconds) {
  worker_outcome o;
  std::error_code ec;
  log_from_ = std::filesystem::exists(log_, ec) ? std::filesystem::file_size(log_, ec) : 0;
  if (pid_ < 0) start();
  auto t0 = clock_type::now();
  const auto requested = t0;
  const std::string line = manifest.string() + "\n";
  std::string reply;
  bool eof = ::write(request_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size());
  for (;;) {
    // Whole lines: a "ready" starts the clock; any other line is the reply.
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string got = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (got == "ready") {
        if (!ready_) t0 = clock_type::now(); // (a prestarted worker's was waiting in the pipe)
        ready_ = true;
        continue;
      }
      reply = got;
      break;
    }
    if (eof) break;
    const auto now = clock_type::now();
    const bool starting = expect_ready_ && !ready_;
    const double left =
        starting ? std::max(start_limit_, timeout_seconds) -
                       std::chrono::duration<double>(now - requested).count()
                 : timeout_seconds - std::chrono::duration<double>(now - t0).count();
    if (left <= 0) {
      (starting ? o.not_started : o.timed_out) = true;
      if (starting) o.start_limit_seconds = std::max(start_limit_, timeout_seconds);
      break;
    }
    pollfd p{reply_fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min(left * 1000.0, 1000.0)) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[256];
    const ssize_t got = ::read(reply_fd_, buf, sizeof buf);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      eof = true;
    } else {
      pending_.append(buf, static_cast<std::size_t>(got));
    }
  }
  o.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (o.timed_out || o.not_started) {
    ::kill(-pid_, SIGKILL);
    ended(status_of_ended::killed, &o.died);
    return o;
  }
  if (reply.empty()) { // it ended without answering: crashed, killed, or exited on its own
    ended(status_of_ended::wait, &o.died);
    return o;
  }
  o.replied = true;
  o.code = std::atoi(reply.c_str());
  if (reply.find("recycle") != std::string::npos) ended(); // it exits after saying so
  return o;
}

void worker_process::ended(status_of_ended need, process_result* died) {
  const int old = pid_;
  pid_ = -1;
  for (int* fd : {&request_fd_, &reply_fd_})
    if (*fd >= 0) {
      ::close(*fd); // end of requests: a live worker exits
      *fd = -1;
    }
  const auto grace = std::chrono::milliseconds(need == status_of_ended::killed ? 0 : 2000);
  if (!prestart_) { // gone before run() returns (inside the caller's GPU gate)
    if (old > 0) {
      const auto r = reap(old, grace);
      if (died) *died = r;
    }
    return;
  }
  try {
    start(); // (its context comes up while the old one is torn down and reaped)
  } catch (const std::exception&) {
    pid_ = -1; // started again at the next run, where a failure is reported
  }
  if (old <= 0) return;
  if (died && need == status_of_ended::wait) {
    // Its exit code is set before it closes the reply pipe that told us it ended, so this seldom
    // waits; an exit code of 0 (or a worker that closed its pipe and lives on) waits as before.
    const auto end = clock_type::now() + grace;
    std::optional<int> status;
    while (!(status = exit_status_now(old)) && clock_type::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!status) {
      *died = reap(old, std::chrono::milliseconds(0));
      return;
    }
    *died = {};
    describe_status(*status, *died);
  } else if (died) { // killed: its own end if it came first, else the SIGKILL sent
    *died = {};
    if (const auto status = exit_status_now(old))
      describe_status(*status, *died);
    else
      died->signal = SIGKILL;
  }
  if (!reaper_) reaper_ = std::make_unique<reaper>();
  reaper_->add(old, grace);
}

std::string worker_process::last_log(std::size_t max_bytes) const {
  std::string s = file_tail(log_, max_bytes);
  std::error_code ec;
  const auto size = std::filesystem::file_size(log_, ec);
  if (!ec && size >= log_from_ && size - log_from_ < s.size())
    s = s.substr(s.size() - (size - log_from_));
  return s;
}

void gpu_gate::lock_shared() {
  std::unique_lock<std::mutex> l(m_);
  cv_.wait(l, [&] { return !writer_ && writers_waiting_ == 0; });
  ++readers_;
}

void gpu_gate::unlock_shared() {
  std::lock_guard<std::mutex> l(m_);
  if (--readers_ == 0) cv_.notify_all();
}

void gpu_gate::lock() {
  std::unique_lock<std::mutex> l(m_);
  ++writers_waiting_;
  cv_.wait(l, [&] { return !writer_ && readers_ == 0; });
  --writers_waiting_;
  writer_ = true;
}

void gpu_gate::unlock() {
  std::lock_guard<std::mutex> l(m_);
  writer_ = false;
  cv_.notify_all();
}

} // namespace kg
