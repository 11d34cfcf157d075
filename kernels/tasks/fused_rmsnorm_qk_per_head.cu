// Task fused_rmsnorm_qk_per_head: q and k normalized per head (RMS over head_dim 128, eps 1e-6)
// and scaled by their own weights, in one launch. One warp per head: each lane holds 4 of the 128
// elements (one 8-byte load), the sum of squares is a warp shuffle reduction; float32 math and one
// bf16 rounding.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
constexpr int head_dim = 128, warps = 8, threads = warps * 32;
constexpr float eps = 1e-6f; // the task's params.eps

__device__ void norm_head(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                          __nv_bfloat16* __restrict__ y, int lane) {
  const uint2 raw = *reinterpret_cast<const uint2*>(x + lane * 4);
  const auto* e = reinterpret_cast<const __nv_bfloat16*>(&raw);
  float v[4], ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[j] = __bfloat162float(e[j]);
    ss += v[j] * v[j];
  }
  for (int o = 16; o > 0; o /= 2)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / head_dim + eps);
  uint2 out;
  auto* o = reinterpret_cast<__nv_bfloat16*>(&out);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    o[j] = __float2bfloat16(v[j] * inv * __bfloat162float(w[lane * 4 + j]));
  *reinterpret_cast<uint2*>(y + lane * 4) = out;
}

// Heads [0, q_heads) are q's, the rest k's (each head_dim contiguous elements).
__global__ void rmsnorm_qk_kernel(const __nv_bfloat16* __restrict__ q,
                                  const __nv_bfloat16* __restrict__ k,
                                  const __nv_bfloat16* __restrict__ qw,
                                  const __nv_bfloat16* __restrict__ kw,
                                  __nv_bfloat16* __restrict__ qo, __nv_bfloat16* __restrict__ ko,
                                  int64_t q_heads, int64_t k_heads) {
  const int64_t head = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (head < q_heads)
    norm_head(q + head * head_dim, qw, qo + head * head_dim, lane);
  else if (head < q_heads + k_heads)
    norm_head(k + (head - q_heads) * head_dim, kw, ko + (head - q_heads) * head_dim, lane);
}

bool is_bf16(const kg_tensor& t, int ndim) {
  return t.dtype == KG_BFLOAT16 && t.ndim == ndim;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 4 || n_out != 2 || !is_bf16(in[0], 3) || !is_bf16(in[1], 3) || !is_bf16(in[2], 1) ||
      !is_bf16(in[3], 1) || !is_bf16(out[0], 3) || !is_bf16(out[1], 3))
    return 1;
  const int64_t T = in[0].shape[0];
  if (T < 1 || in[1].shape[0] != T || in[0].shape[2] != head_dim || in[1].shape[2] != head_dim ||
      in[2].shape[0] != head_dim || in[3].shape[0] != head_dim)
    return 1;
  for (int d = 0; d < 3; ++d)
    if (out[0].shape[d] != in[0].shape[d] || out[1].shape[d] != in[1].shape[d]) return 1;
  const int64_t q_heads = T * in[0].shape[1], k_heads = T * in[1].shape[1];
  rmsnorm_qk_kernel<<<static_cast<unsigned>((q_heads + k_heads + warps - 1) / warps), threads, 0,
                      s>>>(
      static_cast<const __nv_bfloat16*>(in[0].data), static_cast<const __nv_bfloat16*>(in[1].data),
      static_cast<const __nv_bfloat16*>(in[2].data), static_cast<const __nv_bfloat16*>(in[3].data),
      static_cast<__nv_bfloat16*>(out[0].data), static_cast<__nv_bfloat16*>(out[1].data), q_heads,
      k_heads);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
