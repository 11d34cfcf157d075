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

// nvmlClocksThrottleReason* bits the locked-clocks judgement reads (nvml.h is not shipped with
// every toolkit, so the values are spelled out here).
inline constexpr unsigned long long throttle_gpu_idle = 0x1ull;
inline constexpr unsigned long long throttle_applications_clocks_setting = 0x2ull;

// NVML has no getter for "clocks are locked": this is a judgement from what NVML does report,
// and `basis` says which evidence decided it so a reader can disagree.
struct lock_judgement {
  std::optional<bool> locked; // nullopt: not enough evidence either way
  std::string basis;
};

// Locked when the application SM clock target differs from its default, or when the
// ApplicationsClocksSetting throttle reason is active while the GPU is not idle. Unlocked only
// when both pieces of evidence were read and neither fires.
lock_judgement judge_clocks_locked(std::optional<unsigned> sm_application,
                                   std::optional<unsigned> sm_default_application,
                                   std::optional<unsigned long long> throttle_mask);

// Clocks of one device in MHz. Every field is optional: a call that fails or is missing from the
// loaded library leaves its field empty, which the reports print as "unavailable".
struct nvml_clocks {
  std::optional<unsigned> sm_current, sm_application, sm_default_application, sm_max;
  std::optional<unsigned> mem_current, mem_application, mem_default_application, mem_max;
  std::optional<unsigned long long> throttle_mask;
  std::vector<std::string> throttle_reasons; // decoded names of throttle_mask
  std::optional<bool> clocks_locked;         // see judge_clocks_locked
  std::string locked_basis;                  // empty when NVML could not be asked at all
};

// The two readings taken around every timing sample: cheap enough to take each time.
struct nvml_sample {
  std::optional<unsigned> sm_mhz;
  std::optional<unsigned long long> throttle_mask;
};

// Names of the bits of nvmlDeviceGetCurrentClocksThrottleReasons' mask, in bit order ("GpuIdle",
// "ApplicationsClocksSetting", ...). Bits NVML may add later appear as "Unknown0x...".
std::vector<std::string> decode_throttle_reasons(unsigned long long mask);

// One NVML initialization, held for the object's lifetime: nvmlInit_v2 in the constructor when
// the library loads, nvmlShutdown and dlclose in the destructor. Never throws for a missing or
// broken library; available() is false and why_unavailable() says why.
class nvml_session {
public:
  nvml_session();
  ~nvml_session();
  nvml_session(const nvml_session&) = delete;
  nvml_session& operator=(const nvml_session&) = delete;

  bool available() const;
  std::string why_unavailable() const; // empty when available
  const std::string& library() const;  // the name or path handed to dlopen

  std::optional<std::string> driver_version() const;
  std::optional<unsigned> device_count() const;
  std::optional<std::string> device_name(unsigned index) const;
  nvml_clocks clocks(unsigned index) const;
  nvml_sample sample(unsigned index) const; // SM clock and throttle reasons only

  // Whether the library exports nvmlDeviceSetGpuLockedClocks and nvmlDeviceResetGpuLockedClocks.
  bool has_locked_clock_control() const;
  // Lock / reset the GPU clocks of a device (root only). Returns "" on success, else the reason.
  // Only timing/clock_policy calls these, for an explicit `--clocks lock=MHz`; kernelgate never
  // changes clocks on its own, and its tests use a fake NVML.
  std::string lock_gpu_clocks(unsigned index, unsigned min_mhz, unsigned max_mhz);
  std::string reset_gpu_clocks(unsigned index);

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace kg
