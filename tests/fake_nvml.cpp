// A fake libnvidia-ml for tests, loaded through KERNELGATE_NVML_LIBRARY. Its answers come from
// environment variables set by the test, so every NVML path can be checked against values the
// test chose. Set/Reset of locked clocks append a line to FAKE_NVML_LOG and change what the
// getters report, so a clock-locking policy can be tested without touching a real GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
unsigned long long env_ull(const char* name, unsigned long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}
const char* env_str(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
void log_line(const char* line) {
  if (const char* path = std::getenv("FAKE_NVML_LOG")) {
    if (FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "%s\n", line);
      std::fclose(f);
    }
  }
}
int locked_min = 0, locked_max = 0; // 0: not locked
int the_device;                     // its address is the one device handle
constexpr int success = 0, not_supported = 3, invalid_argument = 2, uninitialized = 1;
bool initialized = false;
} // namespace

extern "C" {
int nvmlInit_v2() {
  if (env_int("FAKE_NVML_FAIL_INIT", 0)) return 999; // NVML_ERROR_UNKNOWN
  initialized = true;
  return success;
}
int nvmlShutdown() {
  initialized = false;
  return success;
}
const char* nvmlErrorString(int) {
  return "fake NVML error";
}
int nvmlSystemGetDriverVersion(char* out, unsigned n) {
  std::snprintf(out, n, "%s", env_str("FAKE_NVML_DRIVER", "999.1.2"));
  return success;
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 1;
  return initialized ? success : uninitialized;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (!initialized) return uninitialized;
  if (i != 0) return invalid_argument;
  *d = &the_device;
  return success;
}
int nvmlDeviceGetName(void*, char* out, unsigned n) {
  std::snprintf(out, n, "%s", env_str("FAKE_NVML_NAME", "Fake GPU"));
  return success;
}
// type 1 = SM, 2 = memory
int nvmlDeviceGetClockInfo(void*, int type, unsigned* mhz) {
  if (type == 1)
    *mhz = locked_max ? locked_max : env_int("FAKE_NVML_SM_CLOCK", 1500);
  else if (type == 2)
    *mhz = env_int("FAKE_NVML_MEM_CLOCK", 2600);
  else
    return not_supported;
  return success;
}
int nvmlDeviceGetMaxClockInfo(void*, int type, unsigned* mhz) {
  *mhz = type == 1 ? env_int("FAKE_NVML_MAX_SM_CLOCK", 1980)
                   : env_int("FAKE_NVML_MAX_MEM_CLOCK", 3201);
  return success;
}
int nvmlDeviceGetApplicationsClock(void*, int type, unsigned* mhz) {
  if (type == 1)
    *mhz = locked_max ? locked_max : env_int("FAKE_NVML_APP_SM_CLOCK", 1980);
  else
    *mhz = env_int("FAKE_NVML_APP_MEM_CLOCK", 3201);
  return success;
}
int nvmlDeviceGetDefaultApplicationsClock(void*, int type, unsigned* mhz) {
  *mhz = type == 1 ? env_int("FAKE_NVML_DEFAULT_APP_SM_CLOCK", 1980)
                   : env_int("FAKE_NVML_DEFAULT_APP_MEM_CLOCK", 3201);
  return success;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void*, unsigned long long* mask) {
  if (env_int("FAKE_NVML_NO_THROTTLE", 0)) return not_supported;
  *mask = env_ull("FAKE_NVML_THROTTLE_MASK", 0);
  return success;
}
int nvmlDeviceSetGpuLockedClocks(void*, unsigned lo, unsigned hi) {
  char line[64];
  std::snprintf(line, sizeof line, "lock %u %u", lo, hi);
  log_line(line);
  locked_min = static_cast<int>(lo);
  locked_max = static_cast<int>(hi);
  return success;
}
int nvmlDeviceResetGpuLockedClocks(void*) {
  log_line("reset");
  locked_min = locked_max = 0;
  return success;
}
}
