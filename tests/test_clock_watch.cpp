// The clock watch: its summary on readings given by hand, and its thread against the fake NVML
// (FAKE_NVML_SM_CLOCK and FAKE_NVML_THROTTLE_MASK answer every read), never a real device.
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "timing/clock_watch.h"

using namespace kg;

namespace {
nvml_sample reading(std::optional<unsigned> mhz, std::optional<unsigned long long> mask) {
  nvml_sample s;
  s.sm_mhz = mhz;
  s.throttle_mask = mask;
  return s;
}

struct env_var {
  const char* name;
  env_var(const char* k, const char* v) : name(k) { setenv(k, v, 1); }
  ~env_var() { unsetenv(name); }
};
} // namespace

// Clocks 1980, 1830, 1755, none, 1980: four with a clock, median (1830 + 1980) / 2 = 1905, min
// 1755, max 1980. Masks: 0x4 (SwPowerCap) twice, 0x24 (SwPowerCap + SwThermalSlowdown) once.
TEST(clock_watch, summary_of_readings_by_hand) {
  const auto s =
      summarize_clock_readings({reading(1980, 0), reading(1830, 0x4), reading(1755, 0x24),
                                reading(std::nullopt, 0x4), reading(1980, std::nullopt)});
  EXPECT_EQ(s.readings, 5u);
  EXPECT_EQ(s.with_clock, 4u);
  EXPECT_EQ(s.sm_mhz_median, 1905.0);
  EXPECT_EQ(s.sm_mhz_min, 1755.0);
  EXPECT_EQ(s.sm_mhz_max, 1980.0);
  EXPECT_EQ(s.throttle_reasons.at("SwPowerCap"), 3u);
  EXPECT_EQ(s.throttle_reasons.at("SwThermalSlowdown"), 1u);
  EXPECT_EQ(s.throttle_reasons.size(), 2u);
  const auto j = clock_watch_json(s, std::chrono::milliseconds(100));
  EXPECT_EQ(j["sm_mhz"]["median"], 1905.0);
  EXPECT_EQ(j["throttle_reasons"]["SwPowerCap"], 3);
  EXPECT_FALSE(j.contains("unavailable"));
  EXPECT_TRUE(
      clock_watch_json(summarize_clock_readings({}), std::chrono::milliseconds(100))["sm_mhz"]
          .is_null());
}

// The thread reads at once and then every 10 ms: 60 ms give several readings, each the fake's
// 1425 MHz and HwSlowdown (0x8).
TEST(clock_watch, reads_the_fake_nvml_until_stopped) {
  env_var lib("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
  env_var clock("FAKE_NVML_SM_CLOCK", "1425");
  env_var mask("FAKE_NVML_THROTTLE_MASK", "8");
  nvml_session nvml;
  ASSERT_TRUE(nvml.available()) << nvml.why_unavailable();
  clock_watch w(nvml, std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const auto s = w.stop();
  EXPECT_GE(s.readings, 2u);
  EXPECT_EQ(s.with_clock, s.readings);
  EXPECT_EQ(s.sm_mhz_median, 1425.0);
  EXPECT_EQ(s.throttle_reasons.at("HwSlowdown"), s.readings);
  EXPECT_TRUE(s.unavailable.empty());
  EXPECT_EQ(w.stop().readings, s.readings); // stopped: no more readings
}

// Without NVML nothing is read, and the summary says why.
TEST(clock_watch, without_nvml_says_why) {
  env_var lib("KERNELGATE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  nvml_session nvml;
  clock_watch w(nvml, std::chrono::milliseconds(10));
  const auto s = w.stop();
  EXPECT_EQ(s.readings, 0u);
  EXPECT_FALSE(s.unavailable.empty());
  EXPECT_EQ(clock_watch_json(s, std::chrono::milliseconds(10))["unavailable"], s.unavailable);
}
