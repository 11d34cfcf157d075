#include "suite/progress_meter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <unistd.h>

namespace kg {

bool progress_bar_wanted(const std::ostream& out, bool no_progress) {
  return !no_progress && &out == &std::cout && ::isatty(STDOUT_FILENO);
}

std::string clock_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[40];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

progress_meter::progress_meter(std::ostream& out, bool terminal, std::size_t total,
                               double total_cost)
    : out_(out), terminal_(terminal), total_(total),
      cost_left_(total_cost >= 0 ? total_cost : static_cast<double>(total)),
      cost_is_seconds_(total_cost >= 0), start_(std::chrono::steady_clock::now()) {
  if (terminal_) ticker_ = std::thread([this] { tick(); });
}

progress_meter::~progress_meter() {
  finish();
}

void progress_meter::tick() {
  std::unique_lock<std::mutex> l(m_);
  while (!finished_) {
    if (stop_cv_.wait_for(l, std::chrono::seconds(1), [this] { return finished_; })) break;
    draw_locked();
  }
}

void progress_meter::start(const std::string& item) {
  std::lock_guard<std::mutex> l(m_);
  current_ = item;
  if (terminal_ && !finished_) draw_locked();
}

void progress_meter::done(const std::string& line, double cost, double wall_seconds) {
  std::lock_guard<std::mutex> l(m_);
  ++done_;
  current_.clear();
  cost = std::max(0.0, cost);
  cost_left_ = std::max(0.0, cost_left_ - cost);
  cost_done_ += cost;
  if (wall_seconds >= 0) {
    any_wall_given_ = true;
    wall_given_ += wall_seconds;
  }
  if (terminal_ && !finished_) {
    out_ << "\r\033[K" << line << "\n";
    draw_locked();
  } else {
    out_ << line << std::endl;
  }
}

void progress_meter::note(const std::string& line) {
  std::lock_guard<std::mutex> l(m_);
  if (terminal_ && !finished_) {
    out_ << "\r\033[K" << line << "\n";
    draw_locked();
  } else {
    out_ << line << std::endl;
  }
}

void progress_meter::finish() {
  {
    std::lock_guard<std::mutex> l(m_);
    if (finished_) return;
    finished_ = true;
    if (terminal_) out_ << "\r\033[K" << std::flush;
  }
  stop_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

double progress_meter::eta_locked() const {
  if (cost_done_ <= 0) return cost_is_seconds_ ? cost_left_ : -1.0;
  const double spent =
      any_wall_given_
          ? wall_given_
          : std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return cost_left_ * spent / cost_done_;
}

double progress_meter::eta_seconds() const {
  std::lock_guard<std::mutex> l(m_);
  return eta_locked();
}

std::size_t progress_meter::done_count() const {
  std::lock_guard<std::mutex> l(m_);
  return done_;
}

std::string progress_meter::bar_locked() const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::size_t width = 24;
  const std::size_t filled = total_ ? std::min(width, width * done_ / total_) : width;
  std::ostringstream s;
  s << "[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done_ << "/"
    << total_ << "  " << clock_text(elapsed) << " elapsed, ETA ";
  const double eta = eta_locked();
  if (eta >= 0)
    s << clock_text(eta);
  else
    s << "?";
  if (!current_.empty()) s << "  " << current_;
  return s.str();
}

std::string progress_meter::bar_text() const {
  std::lock_guard<std::mutex> l(m_);
  return bar_locked();
}

void progress_meter::draw_locked() {
  out_ << "\r\033[K" << bar_locked() << std::flush;
}

} // namespace kg
