#include "sandbox/worker_pool.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
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

// Reaps `pid` (waiting up to `grace` for it to end by itself), then kills what is left of its
// group.
process_result reap(int pid, std::chrono::milliseconds grace) {
  process_result r;
  int status = 0;
  const auto end = clock_type::now() + grace;
  pid_t w = 0;
  while ((w = ::waitpid(pid, &status, WNOHANG)) == 0 && clock_type::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(-pid, SIGKILL);
  if (w == 0) ::waitpid(pid, &status, 0);
  describe_status(status, r);
  return r;
}

} // namespace

std::string worker_outcome::describe() const {
  if (timed_out) return "timed out after " + std::to_string(seconds) + " s";
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
  ++starts_;
}

void worker_process::stop() {
  if (request_fd_ >= 0) ::close(request_fd_); // end of requests: a live worker exits
  if (reply_fd_ >= 0) ::close(reply_fd_);
  request_fd_ = reply_fd_ = -1;
  if (pid_ > 0) (void)reap(pid_, std::chrono::milliseconds(2000));
  pid_ = -1;
}

worker_outcome worker_process::run(const std::filesystem::path& manifest, double timeout_seconds) {
  worker_outcome o;
  std::error_code ec;
  log_from_ = std::filesystem::exists(log_, ec) ? std::filesystem::file_size(log_, ec) : 0;
  if (pid_ < 0) start();
  const auto t0 = clock_type::now();
  const std::string line = manifest.string() + "\n";
  std::string reply;
  bool eof = ::write(request_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size());
  while (!eof && reply.find('\n') == std::string::npos) {
    const double left =
        timeout_seconds - std::chrono::duration<double>(clock_type::now() - t0).count();
    if (left <= 0) {
      o.timed_out = true;
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
      reply.append(buf, static_cast<std::size_t>(got));
    }
  }
  o.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (o.timed_out) {
    ::kill(-pid_, SIGKILL);
    o.died = reap(pid_, std::chrono::milliseconds(0));
    pid_ = -1;
    ended();
    return o;
  }
  if (eof) { // it ended without answering: crashed, killed, or exited on its own
    o.died = reap(pid_, std::chrono::milliseconds(2000));
    pid_ = -1;
    ended();
    return o;
  }
  o.replied = true;
  o.code = std::atoi(reply.c_str());
  if (reply.find("recycle") != std::string::npos) ended(); // it exits after saying so
  return o;
}

void worker_process::ended() {
  const int old = pid_;
  pid_ = -1;
  for (int* fd : {&request_fd_, &reply_fd_})
    if (*fd >= 0) {
      ::close(*fd); // end of requests: a live worker exits
      *fd = -1;
    }
  if (prestart_) try {
      start(); // (its context comes up while the old one is torn down and reaped)
    } catch (const std::exception&) {
      pid_ = -1; // started again at the next run, where a failure is reported
    }
  if (old > 0) (void)reap(old, std::chrono::milliseconds(2000));
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
