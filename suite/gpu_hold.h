// The GPU a measuring command runs on, held for the command's lifetime: checked present, its NVML
// session open and the run's clock policy applied (timing/clock_policy.h; a locked clock is
// restored when the hold ends). `kernelgate time` and `kernelgate run` take it the same way.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "gpu/nvml.h"
#include "timing/clock_policy.h"

namespace kg {

class gpu_hold {
public:
  explicit gpu_hold(const clock_policy& policy) : clocks_(nvml_, 0, policy) {}
  const std::string& clocks_note() const { return clocks_.note(); }

private:
  nvml_session nvml_; // before clocks_, which refers to it
  clock_guard clocks_;
};

// Device 0 held with `policy`; null after one line on `err` when there is no GPU ("kernelgate:
// <no_gpu_prefix>: <reason>") or the policy cannot be applied. Either way the command exits
// exit_code::unavailable.
std::unique_ptr<gpu_hold> take_gpu(const clock_policy& policy, const std::string& no_gpu_prefix,
                                   std::ostream& err);

} // namespace kg
