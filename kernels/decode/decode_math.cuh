// Device arithmetic shared by the decode kernels, written once so that the separate kernels and
// the fused q/k-norm + RoPE + append kernel round identically (the engine's fused path is tested
// bit for bit against the chain of separate ones). Products and sums use the _rn intrinsics:
// the compiler may not contract them into FMAs differently in different kernels.
#pragma once

#include <cuda_bf16.h>

namespace kg::decode::math {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// 8 bf16 (a 16-byte chunk) to float32 and back (round to nearest even); element 2i is the low
// half of word i.
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  unsigned u[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    u[i] = *reinterpret_cast<const unsigned*>(&p);
  }
  return make_uint4(u[0], u[1], u[2], u[3]);
}

// 1 / RMS of a vector whose sum of squares is ss over n elements.
__device__ __forceinline__ float inv_rms(float ss, int n, float eps) {
  return rsqrtf(__fadd_rn(__fdiv_rn(ss, static_cast<float>(n)), eps));
}

// The threads of launch_add_rmsnorm's block (one block a row): its sum of squares is each
// thread's chunks t, t + 256, ... squared in order, each warp's sums by warp_sum, then the 8 warps'
// sums in warp order. row_inv_rms_warp repeats that order.
constexpr int rmsnorm_threads = 256;

// 1 / RMS of one row of `cols` bf16 (cols % 8 == 0, at most 4 x 8 x 256; 16-byte aligned) by one
// warp, in launch_add_rmsnorm's order and so with its bits: lane l plays thread v 32 + l of
// every warp v, all 8 at once (one round of loads per 256 chunks), then the warps' sums are
// added in order. warp_sum leaves the same value in every lane (each butterfly step adds the
// same two values), so every lane returns it.
__device__ __forceinline__ float row_inv_rms_warp(const __nv_bfloat16* row, int cols, float eps) {
  constexpr int warps = rmsnorm_threads / 32;
  const uint4* r = reinterpret_cast<const uint4*>(row);
  const int c8 = cols / 8, lane = static_cast<int>(threadIdx.x % 32);
  float ss[warps] = {};
  for (int c0 = 0; c0 < c8; c0 += rmsnorm_threads) {
    uint4 v[warps];
#pragma unroll
    for (int w = 0; w < warps; ++w) { // all of the round's loads first
      const int c = c0 + w * 32 + lane;
      v[w] = c < c8 ? __ldg(r + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int w = 0; w < warps; ++w) {
      float h[8];
      unpack8(v[w], h);
#pragma unroll
      for (int e = 0; e < 8; ++e) // a chunk past the row is zeros: it adds nothing, as there
        ss[w] = __fmaf_rn(h[e], h[e], ss[w]);
    }
  }
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < warps; ++w)
    total += warp_sum(ss[w]);
  return inv_rms(total, cols, eps);
}

// HF's Qwen3RMSNorm: weight * (x * rsqrt(var + eps)).to(bf16), the product rounded again.
__device__ __forceinline__ __nv_bfloat16 scale_round(float x, float inv, __nv_bfloat16 w) {
  const float n = __bfloat162float(__float2bfloat16(__fmul_rn(x, inv)));
  return __float2bfloat16(__fmul_rn(n, __bfloat162float(w)));
}

// cos and sin of pos * theta^(-2i/D), the angle in double: it reaches ~8e3 rad, where a float32
// angle is off by ~1e-3 rad.
__device__ __forceinline__ void rope_cos_sin(int pos, int i, int head_dim, double log_theta,
                                             float* c, float* s) {
  const double angle =
      static_cast<double>(pos) * exp(-log_theta * (2.0 * i / static_cast<double>(head_dim)));
  double sn, cs;
  sincos(angle, &sn, &cs);
  *c = static_cast<float>(cs);
  *s = static_cast<float>(sn);
}

// Rotate-half: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s), each rounded once to bf16.
__device__ __forceinline__ void rope_rotate(float x1, float x2, float c, float s, __nv_bfloat16* y1,
                                            __nv_bfloat16* y2) {
  *y1 = __float2bfloat16(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
  *y2 = __float2bfloat16(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
}

// SwiGLU's gate, bf16(silu(g) u), silu in float32 with IEEE division: the one rounding of the
// SiLU-gate kernel and of the gated GEMV's epilogue (gemv_bf16.h), so the two paths agree.
__device__ __forceinline__ __nv_bfloat16 silu_gate(float g, float u) {
  return __float2bfloat16(__fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u));
}

} // namespace kg::decode::math
