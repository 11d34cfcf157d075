#include "timing/device_info.h"

#include <cuda_runtime_api.h>

namespace kg {

std::string cuda_version_string(int v) {
  if (v <= 0) return "unavailable";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

device_info query_device(int index) {
  device_info d;
  // Each call's status is checked; a failure is recorded, never fatal.
  if (cudaDriverGetVersion(&d.driver_version) != cudaSuccess) d.driver_version = 0;
  if (cudaRuntimeGetVersion(&d.runtime_version) != cudaSuccess) d.runtime_version = 0;
  cudaError_t e = cudaGetDeviceCount(&d.device_count);
  if (e != cudaSuccess) {
    d.device_count = 0;
    d.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    (void)cudaGetLastError(); // clear the sticky error for later callers
    return d;
  }
  if (d.device_count <= index) {
    d.reason = "no CUDA device " + std::to_string(index) + " (" + std::to_string(d.device_count) +
               " found)";
    return d;
  }
  cudaDeviceProp p{};
  e = cudaGetDeviceProperties(&p, index);
  if (e != cudaSuccess) {
    d.reason = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e);
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
