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
