#include "gpu/device_info.h"

#include <cuda_runtime_api.h>

namespace kg {

namespace {

// Records a failed call and clears the runtime's last-error slot, so a later, unrelated
// cudaGetLastError (a kernel launch check, say) does not report this failure as its own.
std::string failure(const char* call, cudaError_t e) {
  (void)cudaGetLastError(); // its return value is the very error being cleared
  return std::string(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}

} // namespace

std::string cuda_version_string(int v) {
  if (v <= 0) return "unavailable";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

device_info query_device(int index) {
  device_info d;

  int version = 0;
  cudaError_t e = cudaDriverGetVersion(&version);
  if (e != cudaSuccess)
    d.driver_version_error = failure("cudaDriverGetVersion", e);
  else if (version == 0) // documented answer when no driver is installed
    d.driver_version_error = "cudaDriverGetVersion: no CUDA driver is installed";
  else
    d.driver_version = version;

  e = cudaRuntimeGetVersion(&version);
  if (e != cudaSuccess)
    d.runtime_version_error = failure("cudaRuntimeGetVersion", e);
  else
    d.runtime_version = version;

  int count = 0;
  e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    d.reason = failure("cudaGetDeviceCount", e);
    return d;
  }
  d.device_count = count;
  if (index < 0 || index >= count) {
    d.reason = "no CUDA device " + std::to_string(index) + " (" + std::to_string(count) + " found)";
    return d;
  }

  cudaDeviceProp p{};
  e = cudaGetDeviceProperties(&p, index);
  if (e != cudaSuccess) {
    d.reason = failure("cudaGetDeviceProperties", e);
    return d;
  }
  d.available = true;
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.memory_bytes = p.totalGlobalMem;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  return d;
}

} // namespace kg
