#include "timing/nvml.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace kg {

namespace {
// The few NVML types and constants used here (nvml.h is not shipped with every toolkit).
using nvml_return = int;
using nvml_device = struct nvml_device_st*;
constexpr nvml_return nvml_success = 0;
constexpr int clock_sm = 1;  // NVML_CLOCK_SM
constexpr int clock_mem = 2; // NVML_CLOCK_MEM
constexpr unsigned long long reason_gpu_idle = 0x1ull;
constexpr unsigned long long reason_app_clocks = 0x2ull;

struct reason_name {
  unsigned long long bit;
  const char* name;
};
constexpr reason_name reasons[] = {
    {0x1ull, "gpu_idle"},
    {0x2ull, "applications_clocks_setting"},
    {0x4ull, "sw_power_cap"},
    {0x8ull, "hw_slowdown"},
    {0x10ull, "sync_boost"},
    {0x20ull, "sw_thermal_slowdown"},
    {0x40ull, "hw_thermal_slowdown"},
    {0x80ull, "hw_power_brake_slowdown"},
    {0x100ull, "display_clock_setting"},
};
} // namespace

std::vector<std::string> decode_throttle_reasons(unsigned long long mask) {
  std::vector<std::string> out;
  unsigned long long known = 0;
  for (const auto& r : reasons) {
    known |= r.bit;
    if (mask & r.bit) out.emplace_back(r.name);
  }
  if (mask & ~known) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "unknown_0x%llx", mask & ~known);
    out.emplace_back(buf);
  }
  return out;
}

struct nvml_session::impl {
  void* handle = nullptr;
  bool initialized = false;
  std::string library, why;
  nvml_return (*init)() = nullptr;
  nvml_return (*shutdown)() = nullptr;
  nvml_return (*driver)(char*, unsigned) = nullptr;
  nvml_return (*count)(unsigned*) = nullptr;
  nvml_return (*by_index)(unsigned, nvml_device*) = nullptr;
  nvml_return (*name)(nvml_device, char*, unsigned) = nullptr;
  nvml_return (*clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*max_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*app_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*default_app_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*throttle)(nvml_device, unsigned long long*) = nullptr;

  template <typename F>
  void bind(F& f, const char* symbol, const char* fallback = nullptr) {
    void* s = dlsym(handle, symbol);
    if (!s && fallback) s = dlsym(handle, fallback);
    f = reinterpret_cast<F>(s);
  }

  std::optional<nvml_device> device(unsigned index) const {
    nvml_device d = nullptr;
    if (!initialized || !by_index || by_index(index, &d) != nvml_success) return std::nullopt;
    return d;
  }
};

nvml_session::nvml_session() : p_(std::make_unique<impl>()) {
  const char* env = std::getenv("KERNELGATE_NVML_LIBRARY");
  p_->library = env && *env ? env : "libnvidia-ml.so.1";
  p_->handle = dlopen(p_->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!p_->handle) {
    const char* e = dlerror();
    p_->why = "cannot load " + p_->library + (e ? std::string(": ") + e : "");
    return;
  }
  p_->bind(p_->init, "nvmlInit_v2", "nvmlInit");
  p_->bind(p_->shutdown, "nvmlShutdown");
  p_->bind(p_->driver, "nvmlSystemGetDriverVersion");
  p_->bind(p_->count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  p_->bind(p_->by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  p_->bind(p_->name, "nvmlDeviceGetName");
  p_->bind(p_->clock, "nvmlDeviceGetClockInfo");
  p_->bind(p_->max_clock, "nvmlDeviceGetMaxClockInfo");
  p_->bind(p_->app_clock, "nvmlDeviceGetApplicationsClock");
  p_->bind(p_->default_app_clock, "nvmlDeviceGetDefaultApplicationsClock");
  // Renamed "event reasons" in newer drivers; both names exist in current libraries.
  p_->bind(p_->throttle, "nvmlDeviceGetCurrentClocksThrottleReasons",
           "nvmlDeviceGetCurrentClocksEventReasons");
  if (!p_->init) {
    p_->why = p_->library + " has no nvmlInit";
    return;
  }
  const nvml_return rc = p_->init();
  if (rc != nvml_success) {
    p_->why = "nvmlInit failed with NVML error " + std::to_string(rc);
    return;
  }
  p_->initialized = true;
}

nvml_session::~nvml_session() {
  if (p_->initialized && p_->shutdown) p_->shutdown();
  if (p_->handle) dlclose(p_->handle);
}

bool nvml_session::available() const {
  return p_->initialized;
}
const std::string& nvml_session::why_unavailable() const {
  return p_->why;
}
const std::string& nvml_session::library() const {
  return p_->library;
}

std::optional<std::string> nvml_session::driver_version() const {
  char buf[96] = {};
  if (!p_->initialized || !p_->driver || p_->driver(buf, sizeof buf) != nvml_success)
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
  char buf[128] = {};
  if (!d || !p_->name || p_->name(*d, buf, sizeof buf) != nvml_success) return std::nullopt;
  return std::string(buf);
}

nvml_clocks nvml_session::clocks(unsigned index) const {
  nvml_clocks c;
  const auto d = p_->device(index);
  if (!d) return c;
  auto read = [&](auto fn, int type) -> std::optional<unsigned> {
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
  // Locked clocks show either as application clocks moved off their default, or as the clock
  // being held by the applications-clocks setting while the GPU is busy.
  if (c.sm_application && c.sm_default_application &&
      *c.sm_application != *c.sm_default_application) {
    c.locked = true;
    c.locked_basis = "application SM clock " + std::to_string(*c.sm_application) +
                     " MHz differs from its default " + std::to_string(*c.sm_default_application) +
                     " MHz";
  } else if (c.throttle_mask && (*c.throttle_mask & reason_app_clocks) &&
             !(*c.throttle_mask & reason_gpu_idle)) {
    c.locked = true;
    c.locked_basis = "throttle reason applications_clocks_setting active while not idle";
  } else if (c.sm_application && c.sm_default_application && c.throttle_mask) {
    c.locked = false;
    c.locked_basis = "application clocks at default and no applications_clocks_setting throttle";
  } else {
    c.locked_basis = "unavailable: NVML did not report application clocks or throttle reasons";
  }
  return c;
}

} // namespace kg
