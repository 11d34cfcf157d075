#include "oracles/device_allclose.h"

#include <array>
#include <stdexcept>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"

namespace kg {
namespace {

__device__ __forceinline__ float load(const float* p, std::size_t i) {
  return p[i];
}
__device__ __forceinline__ float load(const __half* p, std::size_t i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ float load(const __nv_bfloat16* p, std::size_t i) {
  return __bfloat162float(p[i]);
}

template <typename T>
__global__ void allclose_kernel(const T* y, const float* e, std::size_t n, float atol, float rtol,
                                unsigned long long* out) {
  unsigned long long bad = 0, first = ~0ull;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float v = load(y, i), o = e[i];
    if (!(fabsf(v - o) <= atol + rtol * fabsf(o))) { // written so that NaN fails
      ++bad;
      if (i < first) first = i;
    }
  }
  if (bad) {
    atomicAdd(&out[0], bad);
    atomicMin(&out[1], first);
  }
}

} // namespace

device_allclose_result device_allclose(const void* y, dtype type, const float* expected,
                                       std::size_t n, float atol, float rtol, cudaStream_t stream) {
  // Allocated once per thread: page-locked allocations cost far more than the check itself.
  thread_local mapped_host<std::array<unsigned long long, 2>> out;
  auto& h = *out.host();
  h = {0, ~0ull};
  unsigned long long* d = out.device()->data();
  const int blocks = 1024, threads = 256;
  switch (type) {
  case dtype::float32:
    allclose_kernel<<<blocks, threads, 0, stream>>>(static_cast<const float*>(y), expected, n, atol,
                                                    rtol, d);
    break;
  case dtype::float16:
    allclose_kernel<<<blocks, threads, 0, stream>>>(static_cast<const __half*>(y), expected, n,
                                                    atol, rtol, d);
    break;
  case dtype::bfloat16:
    allclose_kernel<<<blocks, threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(y), expected,
                                                    n, atol, rtol, d);
    break;
  default:
    throw std::invalid_argument("device_allclose: unsupported dtype " +
                                std::string(dtype_name(type)));
  }
  KG_CUDA_CHECK(cudaGetLastError());
  KG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {h[0], h[0] ? h[1] : 0};
}

} // namespace kg
