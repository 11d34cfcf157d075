// What a measurement does about GPU clocks:
//   observe         record clocks per sample and warn on variation (the default; the only mode
//                   for a shared machine)
//   require-locked  refuse to measure unless the device reports locked clocks
//   lock=<MHz>      lock the SM clock through NVML for the run and restore it afterwards, also
//                   when the run fails (for users on their own machines; needs root)
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "gpu/nvml.h"

namespace kg {

enum class clock_mode { observe, require_locked, lock };

struct clock_policy {
  clock_mode mode = clock_mode::observe;
  unsigned lock_mhz = 0;
  std::string name() const; // as written on the command line
};
std::optional<clock_policy> parse_clock_policy(std::string_view s);

// The policy cannot be honoured: require-locked on unlocked clocks, a failed lock, no NVML.
struct clock_policy_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Applies a policy for its lifetime. For lock=<MHz> the destructor resets the locked clocks:
// the lock never outlives the run, whether it ends normally, by exception or by interruption.
class clock_guard {
public:
  clock_guard(nvml_session& nvml, unsigned device, const clock_policy& policy);
  ~clock_guard();
  clock_guard(const clock_guard&) = delete;
  clock_guard& operator=(const clock_guard&) = delete;
  const std::string& note() const { return note_; } // what was checked or done

private:
  nvml_session& nvml_;
  unsigned device_;
  bool locked_ = false;
  std::string note_;
};

} // namespace kg
