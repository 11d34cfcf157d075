// The GPU's SM clock and throttle reasons, read on a thread while a measurement runs that the
// kernel timer does not time (a decode step loop, serving traces, training steps). The kernel
// timer reads NVML around each of its samples; with this every suite record says what clock it
// ran at, and `compare` can show a clock that moved between two runs beside a ratio that did
// (a run-level shift and a regression look alike in the samples alone). Reading only: NVML's
// getters, never a set call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/nvml.h"

namespace kg {

struct clock_watch_summary {
  std::size_t readings = 0;                                 // samples taken
  std::size_t with_clock = 0;                               // of them, with an SM clock
  double sm_mhz_median = 0, sm_mhz_min = 0, sm_mhz_max = 0; // over with_clock (0 when none)
  std::map<std::string, std::size_t> throttle_reasons;      // active reason -> readings
  std::string unavailable; // why nothing was read (NVML missing), else empty
};

// The summary of readings taken (pure: the tests give it readings by hand). The median of an
// even count is the mean of the two middle values.
clock_watch_summary summarize_clock_readings(const std::vector<nvml_sample>& readings);

// {"readings", "period_ms", "sm_mhz": {"median", "min", "max"} or null, "throttle_reasons":
// {name: readings}, "unavailable" (only when set)}.
nlohmann::json clock_watch_json(const clock_watch_summary& s, std::chrono::milliseconds period);

// Reads device 0 (the device every measurement uses) at once and then every `period` until
// stop() or destruction. With NVML unavailable nothing is read and the summary says why.
class clock_watch {
public:
  clock_watch(const nvml_session& nvml, std::chrono::milliseconds period);
  ~clock_watch();
  clock_watch(const clock_watch&) = delete;
  clock_watch& operator=(const clock_watch&) = delete;

  clock_watch_summary stop(); // ends the thread; the readings so far, summarized

private:
  void loop();
  const nvml_session& nvml_;
  std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<nvml_sample> readings_;
  std::thread thread_;
};

} // namespace kg
