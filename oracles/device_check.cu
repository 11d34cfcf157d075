#include "oracles/device_check.h"

#include <stdexcept>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cuda_check.h"

namespace kg {
namespace {

__device__ __forceinline__ float widen(float v) {
  return v;
}
__device__ __forceinline__ float widen(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float widen(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

// Bytes compared as 32-bit words where the size allows, the rest byte by byte.
__global__ void bits_kernel(const unsigned char* a, const unsigned char* b, std::size_t bytes,
                            unsigned* flag, unsigned code) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  bool bad = false;
  const std::size_t words = bytes / 4;
  const auto* wa = reinterpret_cast<const unsigned*>(a);
  const auto* wb = reinterpret_cast<const unsigned*>(b);
  for (std::size_t i = first; i < words; i += stride)
    bad |= wa[i] != wb[i];
  for (std::size_t i = 4 * words + first; i < bytes; i += stride)
    bad |= a[i] != b[i];
  if (bad) atomicExch(flag, code);
}

template <typename T>
__global__ void close_kernel(const T* got, const T* want, std::size_t n, float atol, float rtol,
                             unsigned* flag, unsigned code) {
  bool bad = false;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float g = widen(got[i]), w = widen(want[i]);
    bad |= !(fabsf(g - w) <= atol + rtol * fabsf(w)); // written so that NaN fails
  }
  if (bad) atomicExch(flag, code);
}

int blocks_for(std::size_t n) {
  const std::size_t per = 256 * 4;
  return static_cast<int>(std::min<std::size_t>(1024, (n + per - 1) / per + 1));
}

} // namespace

void launch_output_check(const void* got, const void* want, std::size_t n, dtype type, bool bitwise,
                         float atol, float rtol, unsigned* flag, unsigned code,
                         cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  if (bitwise || !is_floating(type)) {
    const std::size_t bytes = n * dtype_size(type);
    bits_kernel<<<blocks_for(bytes / 4 + 1), threads, 0, stream>>>(
        static_cast<const unsigned char*>(got), static_cast<const unsigned char*>(want), bytes,
        flag, code);
  } else {
    switch (type) {
    case dtype::float32:
      close_kernel<<<blocks_for(n), threads, 0, stream>>>(static_cast<const float*>(got),
                                                          static_cast<const float*>(want), n, atol,
                                                          rtol, flag, code);
      break;
    case dtype::float16:
      close_kernel<<<blocks_for(n), threads, 0, stream>>>(static_cast<const __half*>(got),
                                                          static_cast<const __half*>(want), n, atol,
                                                          rtol, flag, code);
      break;
    case dtype::bfloat16:
      close_kernel<<<blocks_for(n), threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(got),
                                                          static_cast<const __nv_bfloat16*>(want),
                                                          n, atol, rtol, flag, code);
      break;
    default:
      throw std::invalid_argument("launch_output_check: unsupported dtype " +
                                  std::string(dtype_name(type)));
    }
  }
  KG_CUDA_CHECK(cudaGetLastError());
}

} // namespace kg
