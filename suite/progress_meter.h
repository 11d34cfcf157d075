// Progress of a long command (run, eval, audit, mutants, time). On a terminal: one line redrawn
// in place -- [#####.....] done/total, elapsed, ETA, the item in flight -- refreshed every second
// while an item runs, with each finished item's line kept above it. Otherwise (a pipe, a file,
// --no-progress): only the finished items' lines, one per line, flushed as they come.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace kg {

// Whether to draw the bar: `out` is the process's stdout, stdout is a terminal and the user did
// not pass --no-progress.
bool progress_bar_wanted(const std::ostream& out, bool no_progress);

class progress_meter {
public:
  // `total_cost`: the command's own estimate of all items' time in seconds (done() then takes
  // each item's estimate); without it each item costs 1 and there is no ETA until one has
  // finished. The ETA is the cost left, scaled by the time finished items took per unit of
  // their cost, so it is refined as items finish.
  progress_meter(std::ostream& out, bool terminal, std::size_t total, double total_cost = -1);
  ~progress_meter();
  progress_meter(const progress_meter&) = delete;
  progress_meter& operator=(const progress_meter&) = delete;

  // The item now in flight (shown on the bar).
  void start(const std::string& item);
  // A finished item: its line is kept (printed above the bar). `wall_seconds` < 0: the time
  // since the meter started counts (items that run concurrently share it).
  void done(const std::string& line, double cost = 1.0, double wall_seconds = -1);
  // A line that is not an item (a warning, a heading), kept above the bar.
  void note(const std::string& line);
  // Clears the bar (idempotent; the destructor calls it).
  void finish();

  // Seconds left; -1 while unknown (costs that are counts, before any item finished).
  double eta_seconds() const;
  std::size_t done_count() const;
  // The bar as drawn now, without the terminal's control codes (tests).
  std::string bar_text() const;

private:
  void draw_locked();
  std::string bar_locked() const;
  double eta_locked() const;
  void tick();

  std::ostream& out_;
  bool terminal_;
  std::size_t total_, done_ = 0;
  double cost_left_, cost_done_ = 0, wall_given_ = 0;
  bool cost_is_seconds_, any_wall_given_ = false, finished_ = false;
  std::string current_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex m_;
  std::condition_variable stop_cv_;
  std::thread ticker_; // a terminal only: redraws each second so elapsed and ETA move
};

// "1:05" or "1:02:05".
std::string clock_text(double seconds);

} // namespace kg
