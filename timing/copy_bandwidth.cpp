#include "timing/copy_bandwidth.h"

#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"

namespace kg {

copy_bandwidth measure_copy_bandwidth(gpu_timer& timer, std::size_t bytes) {
  device_buffer src(bytes), dst(bytes);
  KG_CUDA_CHECK(cudaMemset(src.get(), 1, bytes)); // pages touched before the first sample
  const auto t = timer.measure([&](cudaStream_t s) {
    KG_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
  });
  copy_bandwidth out;
  out.median_us = t.summary.median;
  out.gbps = 2.0 * static_cast<double>(bytes) / (t.summary.median * 1e-6) / 1e9;
  return out;
}

copy_bandwidth measure_copy_bandwidth(std::size_t bytes) {
  timing_options o;
  o.max_wall_seconds = 2.0;
  gpu_timer timer(o);
  return measure_copy_bandwidth(timer, bytes);
}

} // namespace kg
