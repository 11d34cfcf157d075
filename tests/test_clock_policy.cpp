// The clock policy against a fake NVML: never a real device's clocks.
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "timing/clock_policy.h"

using namespace kg;

namespace {
class fake_nvml_env {
public:
  fake_nvml_env() {
    log_ = "/tmp/kg_fake_nvml_" + std::to_string(getpid()) + ".log";
    std::remove(log_.c_str());
    set("KERNELGATE_NVML_LIBRARY", FAKE_NVML_PATH);
    set("FAKE_NVML_LOG", log_.c_str());
  }
  ~fake_nvml_env() {
    for (const auto& k : keys_)
      unsetenv(k.c_str());
    std::remove(log_.c_str());
  }
  void set(const char* k, const char* v) {
    setenv(k, v, 1);
    keys_.emplace_back(k);
  }
  std::vector<std::string> log() const {
    std::ifstream f(log_);
    std::vector<std::string> lines;
    for (std::string l; std::getline(f, l);)
      lines.push_back(l);
    return lines;
  }

private:
  std::string log_;
  std::vector<std::string> keys_;
};
} // namespace

TEST(clock_policy, parses_the_three_modes) {
  EXPECT_EQ(parse_clock_policy("observe")->mode, clock_mode::observe);
  EXPECT_EQ(parse_clock_policy("require-locked")->mode, clock_mode::require_locked);
  const auto l = parse_clock_policy("lock=1755");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->mode, clock_mode::lock);
  EXPECT_EQ(l->lock_mhz, 1755u);
  EXPECT_EQ(l->name(), "lock=1755");
  for (auto bad : {"lock=", "lock=0", "lock=17x", "locked", ""})
    EXPECT_FALSE(parse_clock_policy(bad).has_value()) << bad;
}

TEST(clock_policy, observe_changes_nothing) {
  fake_nvml_env env;
  nvml_session nvml;
  { clock_guard g(nvml, 0, *parse_clock_policy("observe")); }
  EXPECT_TRUE(env.log().empty());
}

TEST(clock_policy, lock_then_restore_on_normal_exit) {
  fake_nvml_env env;
  nvml_session nvml;
  {
    clock_guard g(nvml, 0, *parse_clock_policy("lock=1755"));
    EXPECT_EQ(*nvml.clocks(0).sm_application, 1755u); // the fake reports the lock
    EXPECT_EQ(env.log(), std::vector<std::string>{"lock 1755 1755"});
  }
  EXPECT_EQ(env.log(), (std::vector<std::string>{"lock 1755 1755", "reset"}));
}

TEST(clock_policy, lock_is_restored_when_the_run_fails) {
  fake_nvml_env env;
  nvml_session nvml;
  try {
    clock_guard g(nvml, 0, *parse_clock_policy("lock=1410"));
    throw std::runtime_error("measurement failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(env.log(), (std::vector<std::string>{"lock 1410 1410", "reset"}));
}

TEST(clock_policy, a_failed_lock_throws_and_restores_nothing) {
  fake_nvml_env env;
  env.set("FAKE_NVML_LOCK_FAIL", "4"); // NVML_ERROR_NO_PERMISSION
  nvml_session nvml;
  EXPECT_THROW(clock_guard(nvml, 0, *parse_clock_policy("lock=1755")), clock_policy_error);
  EXPECT_EQ(env.log(), std::vector<std::string>{"lock 1755 1755 failed 4"});
}

TEST(clock_policy, require_locked_refuses_unlocked_clocks_and_accepts_locked_ones) {
  fake_nvml_env env;
  env.set("FAKE_NVML_APP_SM_CLOCK", "1980");
  env.set("FAKE_NVML_DEFAULT_APP_SM_CLOCK", "1980");
  env.set("FAKE_NVML_THROTTLE_MASK", "0");
  {
    nvml_session nvml;
    try {
      clock_guard g(nvml, 0, *parse_clock_policy("require-locked"));
      ADD_FAILURE() << "unlocked clocks were accepted";
    } catch (const clock_policy_error& e) {
      EXPECT_NE(std::string(e.what()).find("not locked"), std::string::npos) << e.what();
    }
  }
  env.set("FAKE_NVML_APP_SM_CLOCK", "1755");
  nvml_session nvml;
  clock_guard g(nvml, 0, *parse_clock_policy("require-locked"));
  EXPECT_NE(g.note().find("1755"), std::string::npos);
  EXPECT_TRUE(env.log().empty()); // checking never changes clocks
}

TEST(clock_policy, require_locked_without_nvml_is_an_error) {
  setenv("KERNELGATE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  nvml_session nvml;
  EXPECT_THROW(clock_guard(nvml, 0, *parse_clock_policy("require-locked")), clock_policy_error);
  unsetenv("KERNELGATE_NVML_LIBRARY");
}
