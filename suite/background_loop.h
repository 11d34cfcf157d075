// A loop on a thread of its own, for the work a workload keeps running beside what it measures
// (a bandwidth hog, a training job): the body loops until `stopping` turns true; the first
// exception it throws ends the loop and is rethrown by stop(), named after the loop.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace kg {

class background_loop {
public:
  using body_fn = std::function<void(const std::atomic<bool>& stopping)>;

  // `on_exit` runs on the thread once the body has returned or thrown (after its error is kept).
  background_loop(std::string what, body_fn body, std::function<void()> on_exit = {})
      : what_(std::move(what)) {
    thread_ = std::thread([this, body = std::move(body), on_exit = std::move(on_exit)] {
      try {
        body(stopping_);
      } catch (const std::exception& e) {
        keep(e.what());
      } catch (...) {
        keep("an exception that is not a std::exception");
      }
      if (on_exit) on_exit();
    });
  }
  // Stops and joins; an error the loop kept is dropped here (stop() reports it).
  ~background_loop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }
  background_loop(const background_loop&) = delete;
  background_loop& operator=(const background_loop&) = delete;

  // Stops the loop, waits for it, and throws std::runtime_error("WHAT: error") if it failed.
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    const std::lock_guard<std::mutex> l(m_);
    if (!error_.empty()) throw std::runtime_error(what_ + ": " + error_);
  }

private:
  void keep(const std::string& why) {
    const std::lock_guard<std::mutex> l(m_);
    error_ = why;
  }

  std::string what_;
  std::atomic<bool> stopping_{false};
  std::mutex m_;
  std::string error_;
  std::thread thread_; // last: started once the members above exist
};

} // namespace kg
