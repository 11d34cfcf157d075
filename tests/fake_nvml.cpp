// A fake libnvidia-ml for tests, loaded through KERNELGATE_NVML_LIBRARY. Its answers come from
// environment variables read at each call, so a test sets exactly the values it then expects:
//
//   FAKE_NVML_FAIL_INIT=<code>        nvmlInit_v2 returns that nvmlReturn_t (e.g. 9) instead of 0
//   FAKE_NVML_DRIVER, FAKE_NVML_NAME  driver version and device name strings
//   FAKE_NVML_DEVICE_COUNT            number of devices (default 1)
//   FAKE_NVML_SM_CLOCK, FAKE_NVML_MEM_CLOCK                   current clocks (MHz)
//   FAKE_NVML_APP_SM_CLOCK, FAKE_NVML_APP_MEM_CLOCK           application clocks
//   FAKE_NVML_DEFAULT_APP_SM_CLOCK, FAKE_NVML_DEFAULT_APP_MEM_CLOCK
//   FAKE_NVML_MAX_SM_CLOCK, FAKE_NVML_MAX_MEM_CLOCK
//   FAKE_NVML_THROTTLE_MASK           throttle-reason bitmask (decimal or 0x...)
//   FAKE_NVML_UNSUPPORTED             comma-separated NVML function names that answer
//                                     NVML_ERROR_NOT_SUPPORTED
//   FAKE_NVML_LOG                     file that nvmlDeviceSet/ResetGpuLockedClocks append to
//   FAKE_NVML_LOCK_FAIL=<code>        nvmlDeviceSetGpuLockedClocks fails with that code
//
// A successful nvmlDeviceSetGpuLockedClocks pins the SM current and application clocks to the
// lock's upper bound until nvmlDeviceResetGpuLockedClocks, so a clock-locking policy can be
// tested without touching a real GPU. That state lives in the loaded library: it lasts while any
// handle to it (an nvml_session, say) stays open.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define FAKE_NVML_API extern "C" __attribute__((visibility("default")))

namespace {

// nvmlReturn_t values (NVML's documented codes).
constexpr int success = 0, uninitialized = 1, invalid_argument = 2, not_supported = 3,
              insufficient_size = 7, unknown = 999;
constexpr int clock_graphics = 0, clock_sm = 1, clock_mem = 2; // nvmlClockType_t

bool initialized = false;
unsigned locked_min = 0, locked_max = 0; // 0: no lock in force
char devices[64];                        // device i's handle is &devices[i]

const char* env_str(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
unsigned long long env_num(const char* name, unsigned long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

bool unsupported(const char* function) {
  const std::string list = env_str("FAKE_NVML_UNSUPPORTED", "");
  const std::size_t n = std::strlen(function);
  for (std::size_t pos = list.find(function); pos != std::string::npos;
       pos = list.find(function, pos + 1)) {
    const bool starts = pos == 0 || list[pos - 1] == ',';
    const bool ends = pos + n == list.size() || list[pos + n] == ',';
    if (starts && ends) return true; // a whole entry, not a prefix of a longer name
  }
  return false;
}

void log_line(const std::string& line) {
  const char* path = std::getenv("FAKE_NVML_LOG");
  if (!path || !*path) return;
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

unsigned device_count() {
  const auto n = env_num("FAKE_NVML_DEVICE_COUNT", 1);
  return n < sizeof devices ? static_cast<unsigned>(n) : sizeof devices;
}

bool valid_device(void* d) {
  const char* p = static_cast<const char*>(d);
  return p >= devices && p < devices + device_count();
}

// Common checks of every per-device call: initialized, a real handle, an out pointer.
int check(const char* function, void* device, const void* out) {
  if (!initialized) return uninitialized;
  if (!valid_device(device) || !out) return invalid_argument;
  if (unsupported(function)) return not_supported;
  return success;
}

int copy_string(const char* s, char* out, unsigned n) {
  if (!out) return invalid_argument;
  if (std::strlen(s) + 1 > n) return insufficient_size;
  std::memcpy(out, s, std::strlen(s) + 1);
  return success;
}

// Answers a clock query: SM (graphics alike) or memory, from the two variables named.
int clock_answer(const char* function, void* d, int type, unsigned* mhz, const char* sm_var,
                 unsigned sm_default, const char* mem_var, unsigned mem_default, bool lockable) {
  if (const int rc = check(function, d, mhz)) return rc;
  if (type == clock_sm || type == clock_graphics)
    *mhz = lockable && locked_max ? locked_max : static_cast<unsigned>(env_num(sm_var, sm_default));
  else if (type == clock_mem)
    *mhz = static_cast<unsigned>(env_num(mem_var, mem_default));
  else
    return not_supported;
  return success;
}

} // namespace

FAKE_NVML_API int nvmlInit_v2() {
  if (const auto code = env_num("FAKE_NVML_FAIL_INIT", 0)) return static_cast<int>(code);
  initialized = true;
  return success;
}

FAKE_NVML_API int nvmlShutdown() {
  if (!initialized) return uninitialized;
  initialized = false;
  return success;
}

FAKE_NVML_API const char* nvmlErrorString(int rc) {
  switch (rc) {
  case success:
    return "Success";
  case uninitialized:
    return "Uninitialized";
  case invalid_argument:
    return "Invalid Argument";
  case not_supported:
    return "Not Supported";
  case 4:
    return "Insufficient Permissions";
  case insufficient_size:
    return "Insufficient Size";
  case 9:
    return "Driver Not Loaded";
  case unknown:
    return "Unknown Error";
  default:
    return "Fake NVML Error";
  }
}

FAKE_NVML_API int nvmlSystemGetDriverVersion(char* out, unsigned n) {
  if (!initialized) return uninitialized;
  if (unsupported("nvmlSystemGetDriverVersion")) return not_supported;
  return copy_string(env_str("FAKE_NVML_DRIVER", "999.1.2"), out, n);
}

FAKE_NVML_API int nvmlDeviceGetCount_v2(unsigned* n) {
  if (!initialized) return uninitialized;
  if (!n) return invalid_argument;
  *n = device_count();
  return success;
}

FAKE_NVML_API int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (!initialized) return uninitialized;
  if (!d || i >= device_count()) return invalid_argument;
  *d = &devices[i];
  return success;
}

FAKE_NVML_API int nvmlDeviceGetName(void* d, char* out, unsigned n) {
  if (const int rc = check("nvmlDeviceGetName", d, out)) return rc;
  return copy_string(env_str("FAKE_NVML_NAME", "Fake GPU"), out, n);
}

FAKE_NVML_API int nvmlDeviceGetClockInfo(void* d, int type, unsigned* mhz) {
  return clock_answer("nvmlDeviceGetClockInfo", d, type, mhz, "FAKE_NVML_SM_CLOCK", 1500,
                      "FAKE_NVML_MEM_CLOCK", 2600, true);
}

FAKE_NVML_API int nvmlDeviceGetMaxClockInfo(void* d, int type, unsigned* mhz) {
  return clock_answer("nvmlDeviceGetMaxClockInfo", d, type, mhz, "FAKE_NVML_MAX_SM_CLOCK", 1980,
                      "FAKE_NVML_MAX_MEM_CLOCK", 3201, false);
}

FAKE_NVML_API int nvmlDeviceGetApplicationsClock(void* d, int type, unsigned* mhz) {
  return clock_answer("nvmlDeviceGetApplicationsClock", d, type, mhz, "FAKE_NVML_APP_SM_CLOCK",
                      1980, "FAKE_NVML_APP_MEM_CLOCK", 3201, true);
}

FAKE_NVML_API int nvmlDeviceGetDefaultApplicationsClock(void* d, int type, unsigned* mhz) {
  return clock_answer("nvmlDeviceGetDefaultApplicationsClock", d, type, mhz,
                      "FAKE_NVML_DEFAULT_APP_SM_CLOCK", 1980, "FAKE_NVML_DEFAULT_APP_MEM_CLOCK",
                      3201, false);
}

FAKE_NVML_API int nvmlDeviceGetCurrentClocksThrottleReasons(void* d, unsigned long long* mask) {
  if (const int rc = check("nvmlDeviceGetCurrentClocksThrottleReasons", d, mask)) return rc;
  *mask = env_num("FAKE_NVML_THROTTLE_MASK", 0);
  return success;
}

FAKE_NVML_API int nvmlDeviceSetGpuLockedClocks(void* d, unsigned lo, unsigned hi) {
  if (!initialized) return uninitialized;
  if (!valid_device(d) || lo > hi) return invalid_argument;
  const std::string call = "lock " + std::to_string(lo) + " " + std::to_string(hi);
  if (const auto code = env_num("FAKE_NVML_LOCK_FAIL", 0)) {
    log_line(call + " failed " + std::to_string(code));
    return static_cast<int>(code);
  }
  log_line(call);
  locked_min = lo;
  locked_max = hi;
  return success;
}

FAKE_NVML_API int nvmlDeviceResetGpuLockedClocks(void* d) {
  if (!initialized) return uninitialized;
  if (!valid_device(d)) return invalid_argument;
  log_line("reset");
  locked_min = locked_max = 0;
  return success;
}
