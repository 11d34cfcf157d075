#include "gpu/nvml.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>

namespace kg {

namespace {

// The few NVML types and constants used here. nvmlReturn_t and nvmlClockType_t are C enums, which
// have int's size and calling convention on every platform NVML ships for.
using nvml_return = int;
using nvml_device = struct nvml_device_st*;
constexpr nvml_return nvml_success = 0;
constexpr int clock_sm = 1;  // NVML_CLOCK_SM
constexpr int clock_mem = 2; // NVML_CLOCK_MEM

struct reason_name {
  unsigned long long bit;
  const char* name;
};
// The suffixes of NVML's nvmlClocksThrottleReason* macros, so a name can be looked up in its docs.
constexpr reason_name reason_names[] = {
    {0x1ull, "GpuIdle"},
    {0x2ull, "ApplicationsClocksSetting"},
    {0x4ull, "SwPowerCap"},
    {0x8ull, "HwSlowdown"},
    {0x10ull, "SyncBoost"},
    {0x20ull, "SwThermalSlowdown"},
    {0x40ull, "HwThermalSlowdown"},
    {0x80ull, "HwPowerBrakeSlowdown"},
    {0x100ull, "DisplayClockSetting"},
};

std::string hex(unsigned long long v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", v);
  return buf;
}

} // namespace

std::vector<std::string> decode_throttle_reasons(unsigned long long mask) {
  std::vector<std::string> out;
  unsigned long long known = 0;
  for (const auto& r : reason_names) {
    known |= r.bit;
    if (mask & r.bit) out.emplace_back(r.name);
  }
  // Newer drivers add bits; keep them visible rather than dropping them silently.
  if (mask & ~known) out.push_back("Unknown" + hex(mask & ~known));
  return out;
}

lock_judgement judge_clocks_locked(std::optional<unsigned> sm_application,
                                   std::optional<unsigned> sm_default_application,
                                   std::optional<unsigned long long> throttle_mask) {
  const bool have_app = sm_application && sm_default_application;
  if (have_app && *sm_application != *sm_default_application)
    return {true, "application SM clock " + std::to_string(*sm_application) +
                      " MHz differs from the default application SM clock " +
                      std::to_string(*sm_default_application) + " MHz"};
  // An idle GPU drops its clocks whatever the setting, so the reason only counts while busy.
  if (throttle_mask && (*throttle_mask & throttle_applications_clocks_setting) &&
      !(*throttle_mask & throttle_gpu_idle))
    return {true, "throttle reason ApplicationsClocksSetting active while not GpuIdle (mask " +
                      hex(*throttle_mask) + ")"};
  if (have_app && throttle_mask)
    return {false, "application SM clock equals its default (" + std::to_string(*sm_application) +
                       " MHz) and ApplicationsClocksSetting is not active while busy (mask " +
                       hex(*throttle_mask) + ")"};
  return {std::nullopt, std::string("no evidence of a lock, but NVML did not report ") +
                            (have_app ? "throttle reasons" : "application SM clocks")};
}

struct nvml_session::impl {
  void* handle = nullptr;
  bool initialized = false;
  std::string library, why;

  nvml_return (*init)() = nullptr;
  nvml_return (*shutdown)() = nullptr;
  const char* (*error_string)(nvml_return) = nullptr;
  nvml_return (*driver)(char*, unsigned) = nullptr;
  nvml_return (*count)(unsigned*) = nullptr;
  nvml_return (*by_index)(unsigned, nvml_device*) = nullptr;
  nvml_return (*name)(nvml_device, char*, unsigned) = nullptr;
  nvml_return (*clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*max_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*app_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*default_app_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*throttle)(nvml_device, unsigned long long*) = nullptr;
  // Called only through timing/clock_policy (an explicit --clocks lock=MHz).
  nvml_return (*set_locked_clocks)(nvml_device, unsigned, unsigned) = nullptr;
  nvml_return (*reset_locked_clocks)(nvml_device) = nullptr;

  impl() {
    const char* env = std::getenv("KERNELGATE_NVML_LIBRARY");
    library = env && *env ? env : "libnvidia-ml.so.1";
    // RTLD_LOCAL: NVML's symbols must not satisfy anything else in the process.
    handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      why = "cannot load " + library + (e ? std::string(": ") + e : std::string());
      return;
    }
    bind(init, "nvmlInit_v2");
    bind(shutdown, "nvmlShutdown");
    bind(error_string, "nvmlErrorString");
    bind(driver, "nvmlSystemGetDriverVersion");
    bind(count, "nvmlDeviceGetCount_v2");
    bind(by_index, "nvmlDeviceGetHandleByIndex_v2");
    bind(name, "nvmlDeviceGetName");
    bind(clock, "nvmlDeviceGetClockInfo");
    bind(max_clock, "nvmlDeviceGetMaxClockInfo");
    bind(app_clock, "nvmlDeviceGetApplicationsClock");
    bind(default_app_clock, "nvmlDeviceGetDefaultApplicationsClock");
    // NVML 12.x renamed "throttle reasons" to "clocks event reasons"; a future library may keep
    // only the new name.
    bind(throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!throttle) bind(throttle, "nvmlDeviceGetCurrentClocksEventReasons");
    bind(set_locked_clocks, "nvmlDeviceSetGpuLockedClocks");
    bind(reset_locked_clocks, "nvmlDeviceResetGpuLockedClocks");
    if (!init) {
      why = library + " does not export nvmlInit_v2";
      return;
    }
    const nvml_return rc = init();
    if (rc != nvml_success) {
      why = "nvmlInit_v2 failed: " + error_text(rc);
      return;
    }
    initialized = true;
  }

  ~impl() {
    // NVML counts initializations: shut down only what this session started.
    if (initialized && shutdown) shutdown();
    if (handle) dlclose(handle);
  }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  template <typename F>
  void bind(F& f, const char* symbol) {
    f = reinterpret_cast<F>(dlsym(handle, symbol));
  }

  std::string error_text(nvml_return rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return (s ? std::string(s) + " " : std::string()) + "(NVML error " + std::to_string(rc) + ")";
  }

  std::optional<nvml_device> device(unsigned index) const {
    nvml_device d = nullptr;
    if (!initialized || !by_index || by_index(index, &d) != nvml_success) return std::nullopt;
    return d;
  }
};

nvml_session::nvml_session() : p_(std::make_unique<impl>()) {}
nvml_session::~nvml_session() = default;

bool nvml_session::available() const {
  return p_->initialized;
}

std::string nvml_session::why_unavailable() const {
  return p_->why;
}

const std::string& nvml_session::library() const {
  return p_->library;
}

bool nvml_session::has_locked_clock_control() const {
  return p_->set_locked_clocks && p_->reset_locked_clocks;
}

std::string nvml_session::lock_gpu_clocks(unsigned index, unsigned min_mhz, unsigned max_mhz) {
  const auto d = p_->device(index);
  if (!d) return "NVML unavailable: " + why_unavailable();
  if (!p_->set_locked_clocks) return p_->library + " has no nvmlDeviceSetGpuLockedClocks";
  const int rc = p_->set_locked_clocks(*d, min_mhz, max_mhz);
  return rc == 0 ? "" : "nvmlDeviceSetGpuLockedClocks failed with NVML error " + std::to_string(rc);
}

std::string nvml_session::reset_gpu_clocks(unsigned index) {
  const auto d = p_->device(index);
  if (!d) return "NVML unavailable: " + why_unavailable();
  if (!p_->reset_locked_clocks) return p_->library + " has no nvmlDeviceResetGpuLockedClocks";
  const int rc = p_->reset_locked_clocks(*d);
  return rc == 0 ? ""
                 : "nvmlDeviceResetGpuLockedClocks failed with NVML error " + std::to_string(rc);
}

std::optional<std::string> nvml_session::driver_version() const {
  char buf[96] = {}; // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
  if (!p_->initialized || !p_->driver || p_->driver(buf, sizeof buf - 1) != nvml_success)
    return std::nullopt;
  return std::string(buf);
}

std::optional<unsigned> nvml_session::device_count() const {
  unsigned n = 0;
  if (!p_->initialized || !p_->count || p_->count(&n) != nvml_success) return std::nullopt;
  return n;
}

std::optional<std::string> nvml_session::device_name(unsigned index) const {
  const auto d = p_->device(index);
  char buf[128] = {}; // NVML_DEVICE_NAME_V2_BUFFER_SIZE is 96
  if (!d || !p_->name || p_->name(*d, buf, sizeof buf - 1) != nvml_success) return std::nullopt;
  return std::string(buf);
}

nvml_sample nvml_session::sample(unsigned index) const {
  nvml_sample out;
  const auto d = p_->device(index);
  if (!d) return out;
  unsigned v = 0;
  if (p_->clock && p_->clock(*d, clock_sm, &v) == nvml_success) out.sm_mhz = v;
  unsigned long long mask = 0;
  if (p_->throttle && p_->throttle(*d, &mask) == nvml_success) out.throttle_mask = mask;
  return out;
}

nvml_clocks nvml_session::clocks(unsigned index) const {
  nvml_clocks c;
  const auto d = p_->device(index);
  if (!d) return c;
  using getter = nvml_return (*)(nvml_device, int, unsigned*);
  auto read = [&](getter fn, int type) -> std::optional<unsigned> {
    unsigned v = 0;
    if (!fn || fn(*d, type, &v) != nvml_success) return std::nullopt;
    return v;
  };
  c.sm_current = read(p_->clock, clock_sm);
  c.mem_current = read(p_->clock, clock_mem);
  c.sm_max = read(p_->max_clock, clock_sm);
  c.mem_max = read(p_->max_clock, clock_mem);
  c.sm_application = read(p_->app_clock, clock_sm);
  c.mem_application = read(p_->app_clock, clock_mem);
  c.sm_default_application = read(p_->default_app_clock, clock_sm);
  c.mem_default_application = read(p_->default_app_clock, clock_mem);
  unsigned long long mask = 0;
  if (p_->throttle && p_->throttle(*d, &mask) == nvml_success) {
    c.throttle_mask = mask;
    c.throttle_reasons = decode_throttle_reasons(mask);
  }
  auto j = judge_clocks_locked(c.sm_application, c.sm_default_application, c.throttle_mask);
  c.clocks_locked = j.locked;
  c.locked_basis = std::move(j.basis);
  return c;
}

} // namespace kg
