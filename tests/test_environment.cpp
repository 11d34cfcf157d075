// Environment capture: NVML absent, NVML faked (values chosen here, then expected back), no GPU,
// and the text rendering. The fake NVML is tests/fake_nvml.cpp, built as a shared library whose
// path arrives as FAKE_NVML_PATH.
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h> // CUDART_VERSION: the runtime version the code must report
#include <gtest/gtest.h>

#include "reports/environment.h"
#include "gpu/device_info.h"
#include "gpu/nvml.h"

#ifndef FAKE_NVML_PATH
#error "FAKE_NVML_PATH must name the fake NVML shared library"
#endif

using namespace kg;
using nlohmann::json;

namespace {

// Sets or unsets environment variables for one test and restores them after.
class scoped_env {
public:
  scoped_env() = default;
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
  ~scoped_env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }
  void set(const char* k, const std::string& v) {
    save(k);
    setenv(k, v.c_str(), 1);
  }
  void unset(const char* k) {
    save(k);
    unsetenv(k);
  }

private:
  void save(const char* k) {
    const char* old = std::getenv(k);
    saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

const char* const fake_vars[] = {"FAKE_NVML_FAIL_INIT",
                                 "FAKE_NVML_DRIVER",
                                 "FAKE_NVML_NAME",
                                 "FAKE_NVML_DEVICE_COUNT",
                                 "FAKE_NVML_SM_CLOCK",
                                 "FAKE_NVML_MEM_CLOCK",
                                 "FAKE_NVML_APP_SM_CLOCK",
                                 "FAKE_NVML_APP_MEM_CLOCK",
                                 "FAKE_NVML_DEFAULT_APP_SM_CLOCK",
                                 "FAKE_NVML_DEFAULT_APP_MEM_CLOCK",
                                 "FAKE_NVML_MAX_SM_CLOCK",
                                 "FAKE_NVML_MAX_MEM_CLOCK",
                                 "FAKE_NVML_THROTTLE_MASK",
                                 "FAKE_NVML_UNSUPPORTED",
                                 "FAKE_NVML_LOG",
                                 "FAKE_NVML_LOCK_FAIL"};

// Points NVML at the fake with nothing inherited from the caller's environment, and sets every
// clock, so no expectation below can pass on one of the fake's defaults.
void use_fake(scoped_env& e) {
  e.set("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
  for (const char* v : fake_vars)
    e.unset(v);
  e.set("FAKE_NVML_SM_CLOCK", "1755");
  e.set("FAKE_NVML_MEM_CLOCK", "2619");
  e.set("FAKE_NVML_APP_SM_CLOCK", "1830");
  e.set("FAKE_NVML_APP_MEM_CLOCK", "2601");
  e.set("FAKE_NVML_DEFAULT_APP_SM_CLOCK", "1830");
  e.set("FAKE_NVML_DEFAULT_APP_MEM_CLOCK", "2601");
  e.set("FAKE_NVML_MAX_SM_CLOCK", "1977");
  e.set("FAKE_NVML_MAX_MEM_CLOCK", "2631");
  e.set("FAKE_NVML_THROTTLE_MASK", "0");
}

const char* const clock_keys[] = {"sm_current_mhz",
                                  "sm_application_mhz",
                                  "sm_default_application_mhz",
                                  "sm_max_mhz",
                                  "mem_current_mhz",
                                  "mem_application_mhz",
                                  "mem_max_mhz",
                                  "locked",
                                  "locked_basis",
                                  "throttle_reasons",
                                  "throttle_mask"};

bool no_driver_installed() {
  return !std::ifstream("/proc/driver/nvidia/version").good() &&
         !std::ifstream("/dev/nvidiactl").good();
}

} // namespace

// (a) -------------------------------------------------------------------------------------------

TEST(environment, missing_nvml_library_leaves_every_clock_unavailable) {
  scoped_env e;
  const std::string missing = "/nonexistent/kernelgate-test/libnvidia-ml.so.1";
  e.set("KERNELGATE_NVML_LIBRARY", missing);
  json env;
  ASSERT_NO_THROW(env = collect_environment());
  EXPECT_EQ(env["nvml"]["available"], false);
  EXPECT_EQ(env["nvml"]["library"], missing);
  EXPECT_NE(env["nvml"]["reason"].get<std::string>().find(missing), std::string::npos);
  for (const char* k : clock_keys) {
    ASSERT_TRUE(env["clocks"].contains(k)) << k;
    EXPECT_EQ(env["clocks"][k], "unavailable") << k;
  }
  for (const auto& [k, v] : env["clocks"].items())
    EXPECT_EQ(v, "unavailable") << k;
  EXPECT_EQ(env["driver"]["nvml_driver_version"], "unavailable");

  const nvml_session s;
  EXPECT_FALSE(s.available());
  EXPECT_FALSE(s.has_locked_clock_control());
  EXPECT_FALSE(s.clocks(0).sm_current.has_value());
}

// (b) -------------------------------------------------------------------------------------------

TEST(environment, reports_the_clocks_driver_and_throttle_reasons_the_fake_nvml_was_given) {
  scoped_env e;
  use_fake(e);
  e.set("FAKE_NVML_DRIVER", "580.159.04");
  e.set("FAKE_NVML_THROTTLE_MASK", "0x24");
  const json env = collect_environment();
  ASSERT_EQ(env["nvml"]["available"], true) << env["nvml"].dump();
  EXPECT_EQ(env["nvml"]["library"], FAKE_NVML_PATH);
  EXPECT_EQ(env["driver"]["nvml_driver_version"], "580.159.04");
  const json& c = env["clocks"];
  EXPECT_EQ(c["sm_current_mhz"], 1755);
  EXPECT_EQ(c["mem_current_mhz"], 2619);
  EXPECT_EQ(c["sm_application_mhz"], 1830);
  EXPECT_EQ(c["mem_application_mhz"], 2601);
  EXPECT_EQ(c["sm_default_application_mhz"], 1830);
  EXPECT_EQ(c["sm_max_mhz"], 1977);
  EXPECT_EQ(c["mem_max_mhz"], 2631);
  EXPECT_EQ(c["throttle_mask"], 0x24);
  EXPECT_EQ(c["throttle_reasons"], json({"SwPowerCap", "SwThermalSlowdown"}));
  // Application clock at its default, ApplicationsClocksSetting not set: not locked.
  EXPECT_EQ(c["locked"], false);
  EXPECT_TRUE(c["locked_basis"].is_string());
  EXPECT_NE(c["locked_basis"], "unavailable");
}

TEST(environment, device_name_and_count_come_from_the_fake_nvml) {
  scoped_env e;
  use_fake(e);
  e.set("FAKE_NVML_NAME", "NVIDIA H200 (fake)");
  e.set("FAKE_NVML_DEVICE_COUNT", "3");
  const nvml_session s;
  ASSERT_TRUE(s.available()) << s.why_unavailable();
  EXPECT_EQ(s.why_unavailable(), "");
  EXPECT_EQ(s.device_count(), 3u);
  EXPECT_EQ(s.device_name(0), "NVIDIA H200 (fake)");
  EXPECT_FALSE(s.device_name(3).has_value()); // out of range: handle lookup fails
  EXPECT_TRUE(s.has_locked_clock_control());
}

TEST(environment, locked_when_the_application_clock_differs_from_its_default) {
  scoped_env e;
  use_fake(e);
  e.set("FAKE_NVML_APP_SM_CLOCK", "1410");
  e.set("FAKE_NVML_DEFAULT_APP_SM_CLOCK", "1980");
  const json c = collect_environment()["clocks"];
  EXPECT_EQ(c["locked"], true);
  EXPECT_EQ(c["sm_application_mhz"], 1410);
  EXPECT_EQ(c["sm_default_application_mhz"], 1980);
  const std::string basis = c["locked_basis"];
  EXPECT_NE(basis.find("1410"), std::string::npos) << basis;
  EXPECT_NE(basis.find("1980"), std::string::npos) << basis;
}

TEST(environment, locked_when_applications_clocks_setting_throttles_a_busy_gpu) {
  scoped_env e;
  use_fake(e);
  e.set("FAKE_NVML_THROTTLE_MASK", "0x6"); // ApplicationsClocksSetting | SwPowerCap, busy
  json c = collect_environment()["clocks"];
  EXPECT_EQ(c["locked"], true);
  EXPECT_EQ(c["throttle_reasons"], json({"ApplicationsClocksSetting", "SwPowerCap"}));
  EXPECT_NE(c["locked_basis"].get<std::string>().find("ApplicationsClocksSetting"),
            std::string::npos);

  e.set("FAKE_NVML_THROTTLE_MASK", "0x3"); // the same reason while idle is no evidence
  c = collect_environment()["clocks"];
  EXPECT_EQ(c["locked"], false);
  EXPECT_EQ(c["throttle_reasons"], json({"GpuIdle", "ApplicationsClocksSetting"}));
}

TEST(environment, lock_judgement_is_unavailable_without_enough_evidence) {
  scoped_env e;
  use_fake(e);
  e.set("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetCurrentClocksThrottleReasons");
  json c = collect_environment()["clocks"];
  EXPECT_EQ(c["locked"], "unavailable");
  EXPECT_EQ(c["throttle_mask"], "unavailable");
  EXPECT_EQ(c["throttle_reasons"], "unavailable");
  EXPECT_EQ(c["sm_current_mhz"], 1755); // the other getters still answer

  // Positive evidence alone suffices: application clocks unsupported, reason set while busy.
  e.set("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetApplicationsClock");
  e.set("FAKE_NVML_THROTTLE_MASK", "0x2");
  c = collect_environment()["clocks"];
  EXPECT_EQ(c["sm_application_mhz"], "unavailable");
  EXPECT_EQ(c["mem_application_mhz"], "unavailable");
  EXPECT_EQ(c["locked"], true);
}

TEST(environment, judge_clocks_locked_table) {
  const std::optional<unsigned> none;
  const std::optional<unsigned long long> no_mask;
  EXPECT_EQ(judge_clocks_locked(1500u, 1980u, 0ull).locked, true);
  EXPECT_EQ(judge_clocks_locked(1980u, 1980u, 0x2ull).locked, true);
  EXPECT_EQ(judge_clocks_locked(1980u, 1980u, 0x3ull).locked, false);
  EXPECT_EQ(judge_clocks_locked(1980u, 1980u, 0x4ull).locked, false);
  EXPECT_EQ(judge_clocks_locked(1500u, 1980u, no_mask).locked, true);
  EXPECT_EQ(judge_clocks_locked(none, 1980u, 0x2ull).locked, true);
  EXPECT_FALSE(judge_clocks_locked(none, 1980u, 0ull).locked.has_value());
  EXPECT_FALSE(judge_clocks_locked(1980u, 1980u, no_mask).locked.has_value());
  EXPECT_FALSE(judge_clocks_locked(none, none, no_mask).locked.has_value());
}

TEST(environment, failed_nvml_init_is_reported_not_fatal) {
  scoped_env e;
  use_fake(e);
  e.set("FAKE_NVML_FAIL_INIT", "9"); // NVML_ERROR_DRIVER_NOT_LOADED
  {
    const nvml_session s;
    EXPECT_FALSE(s.available());
    EXPECT_NE(s.why_unavailable().find("Driver Not Loaded"), std::string::npos)
        << s.why_unavailable();
    EXPECT_NE(s.why_unavailable().find("9"), std::string::npos) << s.why_unavailable();
    EXPECT_FALSE(s.driver_version().has_value());
  }
  const json env = collect_environment();
  EXPECT_EQ(env["nvml"]["available"], false);
  for (const char* k : clock_keys)
    EXPECT_EQ(env["clocks"][k], "unavailable") << k;
}

TEST(environment, throttle_reason_names) {
  const std::pair<unsigned long long, const char*> table[] = {{0x1, "GpuIdle"},
                                                              {0x2, "ApplicationsClocksSetting"},
                                                              {0x4, "SwPowerCap"},
                                                              {0x8, "HwSlowdown"},
                                                              {0x10, "SyncBoost"},
                                                              {0x20, "SwThermalSlowdown"},
                                                              {0x40, "HwThermalSlowdown"},
                                                              {0x80, "HwPowerBrakeSlowdown"},
                                                              {0x100, "DisplayClockSetting"}};
  for (const auto& [bit, name] : table)
    EXPECT_EQ(decode_throttle_reasons(bit), std::vector<std::string>{name}) << bit;
  EXPECT_EQ(decode_throttle_reasons(0), std::vector<std::string>{});
  EXPECT_EQ(decode_throttle_reasons(0x1 | 0x40),
            (std::vector<std::string>{"GpuIdle", "HwThermalSlowdown"}));
  EXPECT_EQ(decode_throttle_reasons(0x8 | 0x1000),
            (std::vector<std::string>{"HwSlowdown", "Unknown0x1000"}));
}

// (c) -------------------------------------------------------------------------------------------

TEST(environment, without_a_driver_the_gpu_is_unavailable_with_a_reason) {
  if (!no_driver_installed())
    GTEST_SKIP() << "an NVIDIA driver is installed; this test is for machines without one";
  scoped_env e;
  e.set("KERNELGATE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  const json env = collect_environment();
  EXPECT_EQ(env["gpu"]["available"], false);
  ASSERT_TRUE(env["gpu"]["reason"].is_string());
  EXPECT_FALSE(env["gpu"]["reason"].get<std::string>().empty());
  EXPECT_NE(env["gpu"]["reason"], "unavailable");
  for (const char* k : {"name", "sm_count", "l2_bytes", "memory_bytes", "compute_capability"})
    EXPECT_EQ(env["gpu"][k], "unavailable") << k;
  EXPECT_EQ(env["driver"]["cuda_driver_version"], "unavailable");
}

TEST(environment, gpu_section_is_consistent_with_availability) {
  const json gpu = collect_environment()["gpu"];
  ASSERT_TRUE(gpu["available"].is_boolean());
  if (gpu["available"]) {
    EXPECT_FALSE(gpu.contains("reason"));
    EXPECT_GT(gpu["sm_count"].get<int>(), 0);
    EXPECT_GT(gpu["l2_bytes"].get<long long>(), 0);
    EXPECT_GT(gpu["memory_bytes"].get<unsigned long long>(), 0u);
    EXPECT_TRUE(std::regex_match(gpu["compute_capability"].get<std::string>(),
                                 std::regex("[0-9]+\\.[0-9]+")));
    EXPECT_FALSE(gpu["name"].get<std::string>().empty());
  } else {
    EXPECT_FALSE(gpu["reason"].get<std::string>().empty());
  }
}

TEST(environment, runtime_version_is_the_linked_cuda_runtime) {
  const std::string expected =
      std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
  EXPECT_EQ(collect_environment()["cuda_runtime_version"], expected);
}

TEST(environment, cuda_version_strings) {
  EXPECT_EQ(cuda_version_string(12080), "12.8");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(0), "unavailable"); // cudaDriverGetVersion without a driver
}

TEST(environment, every_section_and_field_is_present_and_never_null) {
  scoped_env e;
  e.set("KERNELGATE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  const json env = collect_environment();
  const std::vector<std::pair<const char*, std::vector<const char*>>> required = {
      {"gpu", {"available", "name", "sm_count", "l2_bytes", "memory_bytes", "compute_capability"}},
      {"driver", {"cuda_driver_version", "nvml_driver_version"}},
      {"clocks", {std::begin(clock_keys), std::end(clock_keys)}},
      {"build", {"compiler", "cuda_compiler_version", "cuda_arch", "libtorch", "build_type"}},
      {"git", {"revision", "dirty"}},
      {"cpu", {"model", "logical_cores"}},
      {"os", {"pretty_name", "kernel", "hostname"}},
      {"nvml", {"available", "library", "reason"}}};
  for (const auto& [section, keys] : required) {
    ASSERT_TRUE(env.contains(section)) << section;
    for (const char* k : keys)
      EXPECT_TRUE(env[section].contains(k)) << section << "." << k;
  }
  ASSERT_TRUE(env.contains("cuda_runtime_version"));
  // Walk everything: a field that could not be read must be "unavailable", never null.
  std::vector<std::pair<std::string, json>> todo = {{"", env}};
  while (!todo.empty()) {
    auto [path, v] = todo.back();
    todo.pop_back();
    EXPECT_FALSE(v.is_null()) << path;
    if (v.is_structured())
      for (const auto& [k, child] : v.items())
        todo.emplace_back(path + "/" + k, child);
  }
  EXPECT_NE(env["build"]["compiler"], "unavailable");
  EXPECT_GT(env["cpu"]["logical_cores"].get<unsigned>(), 0u);
}

// (d) -------------------------------------------------------------------------------------------

TEST(environment, text_rendering_names_every_top_level_section) {
  const json env = collect_environment();
  const std::string text = format_environment(env);
  for (const auto& [k, v] : env.items())
    EXPECT_NE(text.find(k + ":"), std::string::npos) << k;
  for (const char* s : {"gpu:", "driver:", "cuda_runtime_version:", "clocks:", "build:", "git:",
                        "cpu:", "os:", "nvml:"})
    EXPECT_NE(text.find(s), std::string::npos) << s;
}

TEST(environment, text_rendering_shows_the_values_it_is_given) {
  const json env = {{"gpu", {{"available", false}, {"reason", "no device in this test"}}},
                    {"clocks",
                     {{"throttle_reasons", {"SwPowerCap", "HwSlowdown"}},
                      {"throttle_mask", 12},
                      {"sm_current_mhz", 1234}}},
                    {"cuda_runtime_version", "12.8"},
                    {"extra_section", {{"key", "value"}}}};
  const std::string text = format_environment(env);
  EXPECT_NE(text.find("no device in this test"), std::string::npos) << text;
  EXPECT_NE(text.find("SwPowerCap, HwSlowdown"), std::string::npos) << text;
  EXPECT_NE(text.find("0xc"), std::string::npos) << text;
  EXPECT_NE(text.find("1234"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda_runtime_version: 12.8"), std::string::npos) << text;
  EXPECT_NE(text.find("extra_section:"), std::string::npos) << text;
  EXPECT_EQ(text.find("driver:"), std::string::npos) << text; // absent sections are skipped
}
