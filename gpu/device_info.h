// Device properties through the CUDA runtime. Never aborts: without a GPU or driver `available`
// is false and `reason` names the failing call with its CUDA error string.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace kg {

struct device_info {
  bool available = false;          // the requested device exists and its properties were read
  std::string reason;              // why not: "<call>: <cudaGetErrorString> (<error name>)"
  std::optional<int> device_count; // empty when cudaGetDeviceCount itself failed
  std::string name;
  int sm_count = 0;
  long long l2_bytes = 0;
  std::size_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  std::optional<int> driver_version; // cudaDriverGetVersion, e.g. 13000; empty without a driver
  std::string driver_version_error;
  std::optional<int> runtime_version; // cudaRuntimeGetVersion of the linked runtime
  std::string runtime_version_error;
};

device_info query_device(int index = 0);

// 13000 -> "13.0", 12080 -> "12.8"
std::string cuda_version_string(int v);

} // namespace kg
