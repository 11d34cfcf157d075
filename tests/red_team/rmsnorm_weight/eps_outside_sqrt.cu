// Red team (a wrong kernel, no cheat): RMSNorm as x / (sqrt(mean(x^2)) + eps) * weight, eps
// outside the square root (bf16 in and out, float32 accumulation). With mean(x^2) ~ 1 the scale
// differs from rsqrt(mean(x^2) + eps) by 5e-7 relative, far inside bf16's 1e-2; rows scaled by
// 1e-3 have mean(x^2) ~ 1e-6 = eps, where the right scale is 1/sqrt(2e-6) and this one ~1/1e-3:
// 41% too large.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
constexpr int threads = 256;

__global__ void rmsnorm_kernel(const __nv_bfloat16* __restrict__ x,
                               const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ y,
                               int64_t cols, float eps) {
  __shared__ float partial[threads / 32];
  const __nv_bfloat16* row = x + blockIdx.x * cols;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += threads) {
    const float v = __bfloat162float(row[c]);
    ss += v * v;
  }
  for (int o = 16; o > 0; o /= 2)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int k = 0; k < threads / 32; ++k)
    total += partial[k];
  const float r = 1.0f / (sqrtf(total / static_cast<float>(cols)) + eps); // the fault
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    y[blockIdx.x * cols + c] =
        __float2bfloat16(__bfloat162float(row[c]) * r * __bfloat162float(w[c]));
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[0].ndim != 2 ||
      in[1].dtype != KG_BFLOAT16 || out[0].dtype != KG_BFLOAT16 || in[1].shape[0] != in[0].shape[1])
    return 1;
  if (in[0].shape[0] == 0) return 0;
  rmsnorm_kernel<<<static_cast<unsigned>(in[0].shape[0]), threads, 0, s>>>(
      static_cast<const __nv_bfloat16*>(in[0].data), static_cast<const __nv_bfloat16*>(in[1].data),
      static_cast<__nv_bfloat16*>(out[0].data), in[0].shape[1], 1e-6f); // the task's params.eps
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
