#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reports/environment.h"
#include "timing/nvml.h"

using namespace kg;

namespace {
// Sets environment variables for one test and restores them after.
class scoped_env {
public:
  void set(const char* k, const char* v) {
    const char* old = std::getenv(k);
    saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(k, v, 1);
  }
  ~scoped_env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};
} // namespace

TEST(environment, without_nvml_every_clock_is_unavailable_and_collection_succeeds) {
  scoped_env e;
  e.set("KERNELGATE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  const auto env = collect_environment();
  EXPECT_FALSE(env["nvml"]["available"].get<bool>());
  EXPECT_NE(env["nvml"]["reason"].get<std::string>().find("/nonexistent"), std::string::npos);
  for (const auto& [k, v] : env["clocks"].items()) {
    if (k != "locked_basis") EXPECT_EQ(v, "unavailable") << k;
  }
  EXPECT_EQ(env["driver"]["nvml_driver_version"], "unavailable");
}

TEST(environment, reports_what_the_fake_nvml_says) {
  scoped_env e;
  e.set("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
  e.set("FAKE_NVML_SM_CLOCK", "1755");
  e.set("FAKE_NVML_MEM_CLOCK", "2619");
  e.set("FAKE_NVML_MAX_SM_CLOCK", "1980");
  e.set("FAKE_NVML_DRIVER", "580.159.04");
  e.set("FAKE_NVML_THROTTLE_MASK", "0x24"); // sw_power_cap | sw_thermal_slowdown
  const auto env = collect_environment();
  EXPECT_TRUE(env["nvml"]["available"].get<bool>());
  EXPECT_EQ(env["driver"]["nvml_driver_version"], "580.159.04");
  EXPECT_EQ(env["clocks"]["sm_current_mhz"], 1755);
  EXPECT_EQ(env["clocks"]["mem_current_mhz"], 2619);
  EXPECT_EQ(env["clocks"]["sm_max_mhz"], 1980);
  EXPECT_EQ(env["clocks"]["throttle_mask"], 0x24);
  EXPECT_EQ(env["clocks"]["throttle_reasons"],
            nlohmann::json({"sw_power_cap", "sw_thermal_slowdown"}));
  EXPECT_EQ(env["clocks"]["locked"], false);
}

TEST(environment, locked_judgement_from_application_clocks_and_throttle_reasons) {
  {
    scoped_env e;
    e.set("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
    e.set("FAKE_NVML_APP_SM_CLOCK", "1410");
    e.set("FAKE_NVML_DEFAULT_APP_SM_CLOCK", "1980");
    const nvml_clocks c = nvml_session().clocks(0);
    ASSERT_TRUE(c.locked.has_value());
    EXPECT_TRUE(*c.locked);
    EXPECT_NE(c.locked_basis.find("1410"), std::string::npos);
  }
  {
    scoped_env e;
    e.set("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
    e.set("FAKE_NVML_THROTTLE_MASK", "0x2"); // applications clocks setting, busy
    EXPECT_TRUE(*nvml_session().clocks(0).locked);
    e.set("FAKE_NVML_THROTTLE_MASK", "0x3"); // ... but idle: not evidence of a lock
    EXPECT_FALSE(*nvml_session().clocks(0).locked);
  }
  {
    scoped_env e;
    e.set("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
    e.set("FAKE_NVML_NO_THROTTLE", "1");
    EXPECT_FALSE(nvml_session().clocks(0).locked.has_value());
  }
}

TEST(environment, failed_init_is_reported_not_fatal) {
  scoped_env e;
  e.set("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
  e.set("FAKE_NVML_FAIL_INIT", "1");
  const nvml_session s;
  EXPECT_FALSE(s.available());
  EXPECT_NE(s.why_unavailable().find("999"), std::string::npos);
  EXPECT_EQ(collect_environment()["clocks"]["sm_current_mhz"], "unavailable");
}

TEST(environment, throttle_decoding) {
  EXPECT_EQ(decode_throttle_reasons(0), std::vector<std::string>{});
  EXPECT_EQ(decode_throttle_reasons(0x1 | 0x40),
            (std::vector<std::string>{"gpu_idle", "hw_thermal_slowdown"}));
  EXPECT_EQ(decode_throttle_reasons(0x1000), std::vector<std::string>{"unknown_0x1000"});
}

TEST(environment, gpu_section_and_text_rendering) {
  const auto env = collect_environment();
  if (!env["gpu"]["available"].get<bool>()) {
    EXPECT_FALSE(env["gpu"]["reason"].get<std::string>().empty());
    EXPECT_EQ(env["gpu"]["sm_count"], "unavailable");
  } else {
    EXPECT_GT(env["gpu"]["sm_count"].get<int>(), 0);
  }
  EXPECT_EQ(env["git"]["revision"].get<std::string>().size() == 40 ||
                env["git"]["revision"] == "unavailable",
            true);
  const std::string text = format_environment(env);
  for (const auto& s : {"gpu:", "driver:", "clocks:", "build:", "git:", "cpu:", "os:", "nvml:"})
    EXPECT_NE(text.find(s), std::string::npos) << s;
}
