#include "timing/clock_policy.h"

#include <charconv>
#include <iostream>

namespace kg {

std::string clock_policy::name() const {
  switch (mode) {
  case clock_mode::observe:
    return "observe";
  case clock_mode::require_locked:
    return "require-locked";
  case clock_mode::lock:
    return "lock=" + std::to_string(lock_mhz);
  }
  return "unknown";
}

std::optional<clock_policy> parse_clock_policy(std::string_view s) {
  if (s == "observe") return clock_policy{clock_mode::observe, 0};
  if (s == "require-locked") return clock_policy{clock_mode::require_locked, 0};
  constexpr std::string_view prefix = "lock=";
  if (s.substr(0, prefix.size()) == prefix) {
    unsigned mhz = 0;
    const auto digits = s.substr(prefix.size());
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mhz);
    if (ec == std::errc() && end == digits.data() + digits.size() && mhz > 0)
      return clock_policy{clock_mode::lock, mhz};
  }
  return std::nullopt;
}

clock_guard::clock_guard(nvml_session& nvml, unsigned device, const clock_policy& policy)
    : nvml_(nvml), device_(device) {
  switch (policy.mode) {
  case clock_mode::observe:
    note_ = "clocks observed, not changed";
    return;
  case clock_mode::require_locked: {
    if (!nvml_.available())
      throw clock_policy_error("require-locked: NVML unavailable (" + nvml_.why_unavailable() +
                               ")");
    const auto c = nvml_.clocks(device_);
    if (!c.clocks_locked || !*c.clocks_locked)
      throw clock_policy_error("require-locked: clocks are not locked (" + c.locked_basis + ")");
    note_ = "clocks locked: " + c.locked_basis;
    return;
  }
  case clock_mode::lock: {
    const std::string err = nvml_.lock_gpu_clocks(device_, policy.lock_mhz, policy.lock_mhz);
    if (!err.empty())
      throw clock_policy_error("lock=" + std::to_string(policy.lock_mhz) + ": " + err);
    locked_ = true;
    note_ = "SM clock locked at " + std::to_string(policy.lock_mhz) + " MHz for this run";
    return;
  }
  }
}

clock_guard::~clock_guard() {
  if (!locked_) return;
  const std::string err = nvml_.reset_gpu_clocks(device_);
  if (!err.empty()) std::cerr << "kernelgate: could not restore GPU clocks: " << err << "\n";
}

} // namespace kg
