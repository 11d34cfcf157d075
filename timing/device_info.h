// Device properties through the CUDA runtime. Never aborts: without a GPU or driver `available`
// is false and `reason` carries the CUDA error string.
#pragma once

#include <cstddef>
#include <string>

namespace kg {

struct device_info {
  bool available = false;
  std::string reason;
  int device_count = 0;
  std::string name;
  int sm_count = 0;
  long long l2_bytes = 0;
  std::size_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;  // cudaDriverGetVersion: 0 where no driver is installed
  int runtime_version = 0; // cudaRuntimeGetVersion
};

device_info query_device(int index = 0);

// 13000 -> "13.0"
std::string cuda_version_string(int v);

} // namespace kg
