#include "timing/clock_watch.h"

#include <algorithm>

namespace kg {

clock_watch_summary summarize_clock_readings(const std::vector<nvml_sample>& readings) {
  clock_watch_summary s;
  s.readings = readings.size();
  std::vector<double> mhz;
  for (const auto& r : readings) {
    if (r.sm_mhz) mhz.push_back(*r.sm_mhz);
    if (r.throttle_mask)
      for (const auto& name : decode_throttle_reasons(*r.throttle_mask))
        ++s.throttle_reasons[name];
  }
  s.with_clock = mhz.size();
  if (mhz.empty()) return s;
  std::sort(mhz.begin(), mhz.end());
  const std::size_t n = mhz.size();
  s.sm_mhz_median = n % 2 ? mhz[n / 2] : (mhz[n / 2 - 1] + mhz[n / 2]) / 2;
  s.sm_mhz_min = mhz.front();
  s.sm_mhz_max = mhz.back();
  return s;
}

nlohmann::json clock_watch_json(const clock_watch_summary& s, std::chrono::milliseconds period) {
  nlohmann::json j = {{"readings", s.readings},
                      {"period_ms", period.count()},
                      {"sm_mhz", nullptr},
                      {"throttle_reasons", nlohmann::json::object()}};
  if (s.with_clock > 0)
    j["sm_mhz"] = {{"median", s.sm_mhz_median}, {"min", s.sm_mhz_min}, {"max", s.sm_mhz_max}};
  for (const auto& [name, count] : s.throttle_reasons)
    j["throttle_reasons"][name] = count;
  if (!s.unavailable.empty()) j["unavailable"] = s.unavailable;
  return j;
}

clock_watch::clock_watch(const nvml_session& nvml, std::chrono::milliseconds period)
    : nvml_(nvml), period_(period) {
  if (nvml_.available()) thread_ = std::thread([this] { loop(); });
}

clock_watch::~clock_watch() {
  (void)stop();
}

void clock_watch::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const auto r = nvml_.sample(0);
    lock.lock();
    readings_.push_back(r);
    cv_.wait_for(lock, period_, [this] { return stopping_; });
  }
}

clock_watch_summary clock_watch::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  auto s = summarize_clock_readings(readings_);
  if (!nvml_.available()) s.unavailable = nvml_.why_unavailable();
  return s;
}

} // namespace kg
