// More caller threads than GPU workers (the checker audit): a thread takes a worker for one run
// and gives it back before it reads and judges what the run wrote, so no worker waits while the
// CPU judges; and a bound on the output bytes those threads hold at once in memory-backed scratch.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "sandbox/worker_pool.h"

namespace kg {

class worker_set {
public:
  // `make(n)`: worker n (its command, its log, its settings), made once here.
  worker_set(int workers, const std::function<std::unique_ptr<worker_process>(int)>& make);
  worker_set(const worker_set&) = delete;
  worker_set& operator=(const worker_set&) = delete;

  // One worker, the caller's alone until the lease ends.
  class lease {
  public:
    lease(lease&& o) noexcept : set_(o.set_), index_(o.index_) { o.set_ = nullptr; }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    lease& operator=(lease&&) = delete;
    ~lease();
    worker_process& operator*() const { return *set_->workers_[index_]; }
    worker_process* operator->() const { return set_->workers_[index_].get(); }

  private:
    friend class worker_set;
    lease(worker_set* s, std::size_t i) : set_(s), index_(i) {}
    worker_set* set_;
    std::size_t index_;
  };

  lease take(); // waits until a worker is free
  int size() const { return static_cast<int>(workers_.size()); }
  int starts() const; // every worker's process starts (worker_process::starts), summed

private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<worker_process>> workers_;
  std::vector<std::size_t> free_;
};

// Bytes that callers hold at once, bounded. A reservation waits until it fits; one larger than
// the whole budget waits until nothing else is held and then proceeds alone, so no caller waits
// for ever.
class byte_budget {
public:
  explicit byte_budget(std::size_t bytes) : limit_(bytes) {}
  class hold {
  public:
    hold(hold&& o) noexcept : b_(o.b_), n_(o.n_) { o.b_ = nullptr; }
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    hold& operator=(hold&&) = delete;
    ~hold();

  private:
    friend class byte_budget;
    hold(byte_budget* b, std::size_t n) : b_(b), n_(n) {}
    byte_budget* b_;
    std::size_t n_;
  };
  hold reserve(std::size_t bytes);
  std::size_t held() const;

private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::size_t limit_, held_ = 0;
  int holders_ = 0;
};

} // namespace kg
