#include "sandbox/worker_set.h"

#include <stdexcept>

#include "timing/phase_log.h"

namespace kg {

worker_set::worker_set(int workers,
                       const std::function<std::unique_ptr<worker_process>(int)>& make) {
  if (workers < 1) throw std::invalid_argument("worker_set needs at least one worker");
  for (int n = 0; n < workers; ++n) {
    workers_.push_back(make(n));
    free_.push_back(static_cast<std::size_t>(workers - 1 - n)); // (worker 0 taken first)
  }
}

worker_set::lease worker_set::take() {
  std::unique_lock<std::mutex> l(m_);
  if (free_.empty()) {
    scoped_phase phase("audit.wait_worker"); // (logged only when there is a wait)
    cv_.wait(l, [&] { return !free_.empty(); });
  }
  const std::size_t i = free_.back();
  free_.pop_back();
  return lease(this, i);
}

worker_set::lease::~lease() {
  if (!set_) return;
  {
    std::lock_guard<std::mutex> l(set_->m_);
    set_->free_.push_back(index_);
  }
  set_->cv_.notify_one();
}

int worker_set::starts() const {
  int n = 0;
  for (const auto& w : workers_)
    n += w->starts();
  return n;
}

byte_budget::hold byte_budget::reserve(std::size_t bytes) {
  std::unique_lock<std::mutex> l(m_);
  const auto fits = [&] { return holders_ == 0 || held_ + bytes <= limit_; };
  if (!fits()) {
    scoped_phase phase("audit.wait_bytes");
    cv_.wait(l, fits);
  }
  held_ += bytes;
  ++holders_;
  return hold(this, bytes);
}

std::size_t byte_budget::held() const {
  std::lock_guard<std::mutex> l(m_);
  return held_;
}

byte_budget::hold::~hold() {
  if (!b_) return;
  {
    std::lock_guard<std::mutex> l(b_->m_);
    b_->held_ -= n_;
    --b_->holders_;
  }
  b_->cv_.notify_all();
}

} // namespace kg
