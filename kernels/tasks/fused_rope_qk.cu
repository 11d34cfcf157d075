// Task fused_rope_qk: rotate-half RoPE of q and k (head_dim 128, theta 1e6) at each token's
// position, in one launch. One block per token: its 64 (cos, sin) pairs are computed once, from
// an angle pos * inv_freq in double (a float32 angle errs by ~pos * 1e-7 rad), into shared
// memory; then each warp rotates whole heads of q and k. float32 math, one bf16 rounding.
#include <cmath>

#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
constexpr int head_dim = 128, half_dim = head_dim / 2, warps = 8, threads = warps * 32;
constexpr double theta = 1e6; // the task's params.theta

struct inv_freqs {
  double f[half_dim]; // theta^(-2i / head_dim), computed on the host in double
};

__device__ void rotate(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                       const float* cs, const float* sn, int lane) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int i = lane + 32 * j;
    const float x1 = __bfloat162float(x[i]), x2 = __bfloat162float(x[i + half_dim]);
    y[i] = __float2bfloat16(x1 * cs[i] - x2 * sn[i]);
    y[i + half_dim] = __float2bfloat16(x2 * cs[i] + x1 * sn[i]);
  }
}

__global__ void rope_kernel(const __nv_bfloat16* __restrict__ q,
                            const __nv_bfloat16* __restrict__ k,
                            const int64_t* __restrict__ positions, __nv_bfloat16* __restrict__ qo,
                            __nv_bfloat16* __restrict__ ko, int64_t hq, int64_t hk,
                            inv_freqs freqs) {
  __shared__ float cs[half_dim], sn[half_dim];
  const int64_t t = blockIdx.x;
  if (threadIdx.x < half_dim) {
    double s, c;
    sincos(static_cast<double>(positions[t]) * freqs.f[threadIdx.x], &s, &c);
    cs[threadIdx.x] = static_cast<float>(c);
    sn[threadIdx.x] = static_cast<float>(s);
  }
  __syncthreads();
  const int lane = threadIdx.x % 32;
  for (int64_t h = threadIdx.x / 32; h < hq + hk; h += warps) {
    if (h < hq)
      rotate(q + (t * hq + h) * head_dim, qo + (t * hq + h) * head_dim, cs, sn, lane);
    else
      rotate(k + (t * hk + h - hq) * head_dim, ko + (t * hk + h - hq) * head_dim, cs, sn, lane);
  }
}

bool is_bf16(const kg_tensor& t, int ndim) {
  return t.dtype == KG_BFLOAT16 && t.ndim == ndim;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 3 || n_out != 2 || !is_bf16(in[0], 3) || !is_bf16(in[1], 3) ||
      in[2].dtype != KG_INT64 || in[2].ndim != 1 || !is_bf16(out[0], 3) || !is_bf16(out[1], 3))
    return 1;
  const int64_t T = in[0].shape[0];
  if (T < 1 || T > 2147483647 || in[1].shape[0] != T || in[2].shape[0] != T ||
      in[0].shape[2] != head_dim || in[1].shape[2] != head_dim)
    return 1;
  for (int d = 0; d < 3; ++d)
    if (out[0].shape[d] != in[0].shape[d] || out[1].shape[d] != in[1].shape[d]) return 1;
  inv_freqs freqs;
  for (int i = 0; i < half_dim; ++i)
    freqs.f[i] = std::pow(theta, -2.0 * i / head_dim);
  rope_kernel<<<static_cast<unsigned>(T), threads, 0, s>>>(
      static_cast<const __nv_bfloat16*>(in[0].data), static_cast<const __nv_bfloat16*>(in[1].data),
      static_cast<const int64_t*>(in[2].data), static_cast<__nv_bfloat16*>(out[0].data),
      static_cast<__nv_bfloat16*>(out[1].data), in[0].shape[1], in[1].shape[1], freqs);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
