// NVML, loaded at run time. The library is dlopen'ed (KERNELGATE_NVML_LIBRARY, else
// libnvidia-ml.so.1) so the same binary runs where there is no driver and reports the fields it
// cannot read as unavailable. Tests point KERNELGATE_NVML_LIBRARY at a fake NVML: clock paths are
// exercised without touching a shared GPU.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kg {

struct nvml_clocks {
  std::optional<unsigned> sm_current, sm_application, sm_default_application, sm_max;
  std::optional<unsigned> mem_current, mem_application, mem_default_application, mem_max;
  std::optional<unsigned long long> throttle_mask;
  std::vector<std::string> throttle_reasons; // decoded names of throttle_mask
  // NVML has no getter for locked clocks: `locked` is a judgement, `locked_basis` says from what.
  std::optional<bool> locked;
  std::string locked_basis;
};

// Names of the bits of nvmlDeviceGetCurrentClocksThrottleReasons' mask (unknown bits as hex).
std::vector<std::string> decode_throttle_reasons(unsigned long long mask);

class nvml_session {
public:
  nvml_session();  // loads and initializes NVML if it can; never throws
  ~nvml_session(); // nvmlShutdown, dlclose
  nvml_session(const nvml_session&) = delete;
  nvml_session& operator=(const nvml_session&) = delete;

  bool available() const;
  const std::string& why_unavailable() const;
  const std::string& library() const;

  std::optional<std::string> driver_version() const;
  std::optional<unsigned> device_count() const;
  std::optional<std::string> device_name(unsigned index) const;
  nvml_clocks clocks(unsigned index) const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace kg
