// The timing loop's decisions that need no GPU: the stopping rule and the clock floor.
#include <gtest/gtest.h>

#include "timing/gpu_timer.h"
#include "base/rng.h"

using namespace kg;

namespace {
std::vector<double> noisy(double centre, double rel_sd, int n, std::uint64_t seed) {
  rng r(seed, 1);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x)
    v = centre * (1.0 + rel_sd * r.normal());
  return x;
}
} // namespace

TEST(stopping_rule, needs_minimum_samples_and_gpu_time) {
  timing_options o;
  o.min_samples = 30;
  o.min_gpu_seconds = 0.01;
  const auto tight = noisy(100.0, 0.001, 29, 1);
  EXPECT_EQ(gpu_timer::stop_reason(o, tight, 1.0, 0.1, 29), ""); // too few
  const auto enough = noisy(100.0, 0.001, 40, 1);
  EXPECT_EQ(gpu_timer::stop_reason(o, enough, 0.001, 0.1, 40), ""); // too little GPU time
  EXPECT_EQ(gpu_timer::stop_reason(o, enough, 0.02, 0.1, 40), "target_reached");
}

TEST(stopping_rule, the_gpu_time_minimum_is_waived_once_enough_samples_are_kept) {
  timing_options o;
  o.min_gpu_seconds = 0.25;
  o.enough_samples = 2000;
  const auto short_kernel = noisy(5.0, 0.01, 1999, 4); // 5 us each: 0.01 s of GPU time
  EXPECT_EQ(gpu_timer::stop_reason(o, short_kernel, 0.01, 0.1, 1999), "");
  const auto more = noisy(5.0, 0.01, 2000, 4);
  EXPECT_EQ(gpu_timer::stop_reason(o, more, 0.01, 0.1, 2000), "target_reached");
}

TEST(stopping_rule, noisy_samples_keep_going_until_a_cap) {
  timing_options o;
  o.target_rel_halfwidth = 0.0025;
  const auto wide = noisy(100.0, 0.05, 40, 2); // half-width ~ 1.5% of the median
  EXPECT_EQ(gpu_timer::stop_reason(o, wide, 1.0, 0.1, 40), "");
  EXPECT_EQ(gpu_timer::stop_reason(o, wide, 1.0, o.max_wall_seconds, 40), "wall_cap");
  EXPECT_EQ(gpu_timer::stop_reason(o, wide, 1.0, 0.1, o.max_samples), "max_samples");
  // The same noise with many more samples narrows the interval enough.
  const auto many = noisy(100.0, 0.05, 4000, 3);
  EXPECT_EQ(gpu_timer::stop_reason(o, many, 1.0, 0.1, 4000), "target_reached");
}

TEST(clock_floor, discards_samples_below_the_fraction_of_the_modal_clock) {
  std::vector<timing_sample> s;
  for (int i = 0; i < 10; ++i)
    s.push_back({.gpu_us = 10.0, .sm_mhz = 1980.0});
  s.push_back({.gpu_us = 12.0, .sm_mhz = 1700.0}); // 86% of 1980: below a 0.9 floor
  s.push_back({.gpu_us = 11.0, .sm_mhz = 1800.0}); // 91%: kept
  s.push_back({.gpu_us = 10.0, .sm_mhz = 0.0}); // no clock reading: never discarded on its account
  EXPECT_DOUBLE_EQ(gpu_timer::apply_clock_floor(s, 0.9), 1980.0);
  EXPECT_TRUE(s[10].discarded);
  EXPECT_FALSE(s[11].discarded);
  EXPECT_FALSE(s[12].discarded);
  EXPECT_FALSE(s[0].discarded);
}

TEST(timing_backend, names_round_trip) {
  EXPECT_EQ(parse_timing_backend("events"), timing_backend::events);
  EXPECT_EQ(parse_timing_backend("graph"), timing_backend::graph);
  EXPECT_EQ(parse_timing_backend("cupti"), timing_backend::cupti);
  EXPECT_EQ(parse_timing_backend("auto"), timing_backend::automatic);
  EXPECT_EQ(parse_timing_backend("counters"), timing_backend::counters);
  EXPECT_EQ(timing_backend_name(timing_backend::counters), "counters");
  for (auto b : {timing_backend::automatic, timing_backend::events, timing_backend::graph,
                 timing_backend::cupti, timing_backend::counters})
    EXPECT_EQ(parse_timing_backend(timing_backend_name(b)), b);
  EXPECT_FALSE(parse_timing_backend("nvtx").has_value());
  EXPECT_FALSE(parse_timing_backend("counter").has_value());
}

// The counters backend's result names its metric and the kernels it summed; the others do not.
TEST(timing_result, a_counters_result_names_its_metric_and_kernels_per_call) {
  timing_result r;
  r.backend = "counters";
  r.kernels_per_call = 2;
  const auto j = r.to_json(false);
  EXPECT_EQ(j.at("backend"), "counters");
  EXPECT_EQ(j.at("counter_metric"), "gpu__time_duration.sum");
  EXPECT_EQ(j.at("kernels_per_call"), 2);
  timing_result e;
  e.backend = "events";
  EXPECT_EQ(e.to_json(false).count("counter_metric"), 0u);
}

TEST(timing_result, a_result_that_failed_its_checks_carries_no_time) {
  timing_result r;
  r.backend = "events";
  r.status = "REWARD_HACK";
  r.status_reason = "timed call 3 on input set 1: element 0 is nan, expected 0.5";
  r.samples.push_back({.gpu_us = 12.0, .event_us = 12.0, .sm_mhz = 1980.0});
  const auto j = r.to_json();
  EXPECT_EQ(j["status"], "REWARD_HACK");
  EXPECT_FALSE(j.contains("median_us"));
  EXPECT_FALSE(j.contains("raw_samples"));
  r.status = "TIMED";
  EXPECT_TRUE(r.to_json().contains("median_us"));
}

TEST(clock_warning, steady_clocks_are_quiet_and_variation_or_throttling_is_reported) {
  timing_result r;
  r.modal_mhz = 1980;
  r.min_mhz = 1950;
  r.max_mhz = 1985; // 35 MHz = 1.8% of modal: steady
  r.nvml_before.throttle_reasons = {"GpuIdle"};
  EXPECT_EQ(clock_variation_warning(r), "");
  r.min_mhz = 1800; // 185 MHz = 9.3%
  EXPECT_NE(clock_variation_warning(r).find("1800-1985 MHz"), std::string::npos);
  r.min_mhz = 1950;
  r.nvml_after.throttle_reasons = {"SwPowerCap"};
  EXPECT_NE(clock_variation_warning(r).find("SwPowerCap"), std::string::npos);
}

TEST(warmup, clocks_count_as_settled_only_when_the_last_samples_agree) {
  auto at = [](std::initializer_list<double> mhz) {
    std::vector<timing_sample> v;
    for (double m : mhz) {
      timing_sample s;
      s.sm_mhz = m;
      v.push_back(s);
    }
    return v;
  };
  // A ramp from idle: not settled while it climbs, settled once four samples agree to 0.5%.
  EXPECT_FALSE(gpu_timer::clocks_settled(at({1200, 1500, 1800, 1980})));
  EXPECT_FALSE(gpu_timer::clocks_settled(at({1800, 1980, 1980, 1980})));
  EXPECT_TRUE(gpu_timer::clocks_settled(at({1200, 1980, 1980, 1975, 1980})));
  // 1980 vs 1965: 0.76% apart, outside 0.5%; 1980 vs 1971: 0.45%, inside.
  EXPECT_FALSE(gpu_timer::clocks_settled(at({1980, 1965, 1980, 1980})));
  EXPECT_TRUE(gpu_timer::clocks_settled(at({1980, 1971, 1980, 1980})));
  // Too few samples, or a sample without a device clock: only the wall-time rule applies.
  EXPECT_FALSE(gpu_timer::clocks_settled(at({1980, 1980, 1980})));
  EXPECT_FALSE(gpu_timer::clocks_settled(at({1980, 0, 1980, 1980})));
}
