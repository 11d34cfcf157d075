// The ceiling the decode benchmarks divide by: device-to-device copy bandwidth, (read + write)
// bytes over the median time of one cudaMemcpyAsync, timed by the harness like any kernel (L2
// flushed before each sample).
#pragma once

#include <cstddef>

#include "timing/gpu_timer.h"

namespace kg {

struct copy_bandwidth {
  double gbps = 0;      // 2 x bytes / median time
  double median_us = 0; // the copy's median time
};

copy_bandwidth measure_copy_bandwidth(gpu_timer& timer, std::size_t bytes);
// The same with a timer of its own (default options, a 2 s wall cap): for callers whose timer's
// cap is too short for a 1 GiB copy.
copy_bandwidth measure_copy_bandwidth(std::size_t bytes);

} // namespace kg
