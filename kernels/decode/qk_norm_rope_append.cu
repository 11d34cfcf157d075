// The attention prologue of a decode step in one launch: per-head RMSNorm of q and k, RoPE of both,
// and K and V appended to the cache -- what launch_head_rmsnorm (twice), launch_rope and
// launch_kv_append do one after another, with the same rounding (decode_math.cuh), in a launch
// instead of four: a decode step is hundreds of short kernels, and each costs a launch gap.
//
// One warp per (row, head) of a qkv row's q_heads + 2 kv_heads heads. Lane j holds elements
// j + 32 t of its head; with head_dim 64 or 128 the rotate-half partner of element i < D/2,
// i + D/2, sits in the same lane, so RoPE needs no exchange.
#include <cmath>

#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/decode_math.cuh"
#include "kernels/decode/kv_block.cuh"
#include "kernels/decode/programmatic_launch.cuh"

namespace kg::decode {
namespace {

constexpr int warps = 8;

template <int per_lane>
__global__ void prologue_kernel(__nv_bfloat16* __restrict__ qkv, int rows, std::int64_t row_stride,
                                int q_heads, int kv_heads, const __nv_bfloat16* __restrict__ q_w,
                                const __nv_bfloat16* __restrict__ k_w, float eps,
                                const int* __restrict__ positions, double log_theta,
                                const int* __restrict__ slots, __nv_bfloat16* __restrict__ kc,
                                __nv_bfloat16* __restrict__ vc, int max_context,
                                const int* __restrict__ capacities) {
  constexpr int head_dim = per_lane * 32, half = per_lane / 2;
  // A programmatic launch: qkv is read once the GEMV is done; the attention after it may then be
  // scheduled at once (programmatic_launch.cuh): it waits for this kernel before reading.
  pdl::wait();
  pdl::allow_dependents();
  const int heads = q_heads + 2 * kv_heads;
  const int warp = blockIdx.x * warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= rows * heads) return;
  const int b = warp / heads, h = warp % heads;
  __nv_bfloat16* p = qkv + b * row_stride + static_cast<std::int64_t>(h) * head_dim;
  float v[per_lane];
#pragma unroll
  for (int t = 0; t < per_lane; ++t)
    v[t] = __bfloat162float(p[lane + 32 * t]);
  const int pos = positions[b];
  __nv_bfloat16 out[per_lane];
  if (h < q_heads + kv_heads) { // q or k: norm, then rotate
    const __nv_bfloat16* w = h < q_heads ? q_w : k_w;
    float ss = 0.0f;
#pragma unroll
    for (int t = 0; t < per_lane; ++t)
      ss = __fmaf_rn(v[t], v[t], ss); // as launch_head_rmsnorm
    const float inv = math::inv_rms(math::warp_sum(ss), head_dim, eps);
#pragma unroll
    for (int t = 0; t < per_lane; ++t)
      v[t] = __bfloat162float(math::scale_round(v[t], inv, w[lane + 32 * t]));
#pragma unroll
    for (int t = 0; t < half; ++t) {
      float c, s;
      math::rope_cos_sin(pos, lane + 32 * t, head_dim, log_theta, &c, &s);
      math::rope_rotate(v[t], v[t + half], c, s, &out[t], &out[t + half]);
    }
#pragma unroll
    for (int t = 0; t < per_lane; ++t)
      p[lane + 32 * t] = out[t];
  } else { // v: appended as it is
#pragma unroll
    for (int t = 0; t < per_lane; ++t)
      out[t] = __float2bfloat16(v[t]); // exact: v came from bf16
  }
  if (h < q_heads) return;
  const bool is_k = h < q_heads + kv_heads;
  const int kvh = is_k ? h - q_heads : h - q_heads - kv_heads;
  __nv_bfloat16* cache = is_k ? kc : vc;
  const std::size_t at =
      (kv_head_offset(slots[b], capacities, b, kv_heads, kvh, max_context) + pos) * head_dim;
#pragma unroll
  for (int t = 0; t < per_lane; ++t)
    cache[at + lane + 32 * t] = out[t];
}

} // namespace

cudaError_t launch_qk_norm_rope_append(__nv_bfloat16* qkv, int rows, std::int64_t row_stride,
                                       int q_heads, int kv_heads, int head_dim,
                                       const __nv_bfloat16* q_weight, const __nv_bfloat16* k_weight,
                                       float eps, const int* positions, double theta,
                                       const int* slots, __nv_bfloat16* k_cache,
                                       __nv_bfloat16* v_cache, int max_context, cudaStream_t s,
                                       bool programmatic, const int* capacities) {
  if (rows < 1 || q_heads < 1 || kv_heads < 1 || !qkv || !q_weight || !k_weight || !positions ||
      !slots || !k_cache || !v_cache || max_context < 1 || !(theta > 1))
    return cudaErrorInvalidValue;
  const int blocks = (rows * (q_heads + 2 * kv_heads) + warps - 1) / warps;
  const double log_theta = std::log(theta);
  switch (head_dim) {
  case 64:
    return pdl::launch(prologue_kernel<2>, dim3(blocks), dim3(warps * 32), 0, s, programmatic, 1u,
                       qkv, rows, row_stride, q_heads, kv_heads, q_weight, k_weight, eps, positions,
                       log_theta, slots, k_cache, v_cache, max_context, capacities);
  case 128:
    return pdl::launch(prologue_kernel<4>, dim3(blocks), dim3(warps * 32), 0, s, programmatic, 1u,
                       qkv, rows, row_stride, q_heads, kv_heads, q_weight, k_weight, eps, positions,
                       log_theta, slots, k_cache, v_cache, max_context, capacities);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::decode
