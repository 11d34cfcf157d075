// The allclose check run where the output already is: on the GPU. Timing with honest inputs checks
// outputs of many timed calls; copying a 64 MB output to the host and comparing it there took
// ~0.1 s per check, which made the checks, not the GPU, set the pace of a run.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "workloads/tensor.h"

namespace kg {

struct device_allclose_result {
  std::uint64_t mismatches = 0; // elements with !(|y - e| <= atol + rtol * |e|) (NaN included)
  std::uint64_t first = 0;      // lowest mismatching index (valid when mismatches > 0)
};

// y: `n` elements of `type` (float32, float16 or bfloat16) on the device; expected: n floats on
// the device. Runs on `stream` and waits for it. Throws cuda_error on a CUDA failure and
// std::invalid_argument for another dtype.
device_allclose_result device_allclose(const void* y, dtype type, const float* expected,
                                       std::size_t n, float atol, float rtol, cudaStream_t stream);

} // namespace kg
