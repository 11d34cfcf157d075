// Split-KV attention stage 1's tiles on the tensor cores (attention_config::tensor_cores), the
// part of attend_chunks (attention_splitkv.cu) that replaces the FMA path's loop over a chunk's
// tiles: the same ring, the same chunk state out (m, l, o a head), other arithmetic.
#pragma once

#include <cmath>

#include <cuda_bf16.h>

#include "kernels/decode/cp_async.cuh"
#include "kernels/decode/mma_sync.cuh"

namespace kg::decode {

// Stage 1's tiles on the tensor cores (attention_config::tensor_cores; 64-token tiles, 4 warps).
// Per tile, warp w takes tokens 16 w .. 16 w + 15:
//  - S^T = K Q^T: K's A fragments by ldmatrix from the swizzled ring (tokens are the M rows), q's
//    B fragments (group heads as the N columns, zeros past the group) loaded once. Even and odd
//    k16 steps sum apart and then add, halving the dependent chain of MMAs.
//  - The tile's maximum per head over the warp's tokens (shuffles), then over the warps (shared,
//    warp order); P^T = exp2(S^T - m) stored as bf16 hi and lo terms ([head][token]), and the
//    tile's sum per head from the float32 p, warps added in order.
//  - O^T += V^T P^T: V^T's A fragments by ldmatrix.trans (the warp's own head dimensions as M),
//    P^T's B fragments from shared memory, one MMA for each term.
// A C fragment's columns are heads 2 (lane % 4) and + 1: a lane keeps m, l and O for those two.
// Every order of summation is fixed by the configuration: the same bits on every run.
template <int head_dim, int group, int tile, int stages, typename Begin>
__device__ __forceinline__ void tc_chunk(const __nv_bfloat16* ring, const float* qs, float* wmax,
                                         float* lsum, __nv_bfloat16* probs, int tiles, int c0,
                                         int c1, float scale_log2, Begin begin_tile, float* out) {
  constexpr int warps = 4, rc = head_dim / 8, ksteps = head_dim / 16;
  constexpr int warp_dims = head_dim / warps, mtiles = warp_dims / 16;
  static_assert(tile == 16 * warps && group <= 8 && mtiles >= 1);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int qn = lane / 4, q0 = 2 * (lane % 4);
  __nv_bfloat16* plo = probs + group * tile;
  unsigned qf[ksteps][2];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[mtiles][4];
#pragma unroll
  for (int mt = 0; mt < mtiles; ++mt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      o[mt][x] = 0.0f;
  for (int k = 0; k < tiles; ++k) {
    begin_tile(k); // tile k (and on the first, q) visible to every warp
    if (k == 0) {
#pragma unroll
      for (int kk = 0; kk < ksteps; ++kk) {
        const float* qr = qs + qn * head_dim + kk * 16 + q0;
        qf[kk][0] = qn < group ? pack_bf16(qr[0], qr[1]) : 0u; // exact: q holds bf16 values
        qf[kk][1] = qn < group ? pack_bf16(qr[8], qr[9]) : 0u;
      }
    }
    const __nv_bfloat16* ks = ring + (k % stages) * 2 * tile * head_dim;
    const unsigned ks_addr = shared_address(ks), vs_addr = ks_addr + tile * head_dim * 2;
    float se[4] = {0.0f, 0.0f, 0.0f, 0.0f}, so[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    {
      const int r = warp * 16 + (lane / 8 % 2) * 8 + lane % 8;
#pragma unroll
      for (int kk = 0; kk < ksteps; ++kk) {
        const int ch = 2 * kk + lane / 16;
        unsigned a[4];
        ldmatrix_x4(ks_addr + (r * rc + (ch ^ (r & 7))) * 16, a);
        if (kk % 2)
          mma_bf16(so, a, qf[kk][0], qf[kk][1]);
        else
          mma_bf16(se, a, qf[kk][0], qf[kk][1]);
      }
    }
    const int tok0 = c0 + k * tile, ta = warp * 16 + lane / 4;
    float s[4];
#pragma unroll
    for (int x = 0; x < 4; ++x)
      s[x] = (se[x] + so[x]) * scale_log2;
    if (tok0 + ta >= c1) s[0] = s[1] = -INFINITY;
    if (tok0 + ta + 8 >= c1) s[2] = s[3] = -INFINITY;
    float mx[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 4));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 8));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 16));
      if (lane < 4 && q0 + i < group) wmax[warp * group + q0 + i] = mx[i];
    }
    __syncthreads();
    float alpha[2], p[4], ps[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int q = q0 + i;
      // Every tile holds a valid token, so mn is finite; columns past the group (zero scores,
      // never stored) take 0 so that nothing there turns NaN.
      float mn = 0.0f;
      if (q < group) {
        float tm = wmax[q];
#pragma unroll
        for (int w = 1; w < warps; ++w)
          tm = fmaxf(tm, wmax[w * group + q]);
        mn = fmaxf(m[i], tm);
      }
      alpha[i] = exp2f(m[i] - mn); // 0 on the first tile, exactly 1 while the maximum stands
      m[i] = mn;
      p[i] = exp2f(s[i] - mn);
      p[2 + i] = exp2f(s[2 + i] - mn);
      if (q < group) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int t = ta + 8 * h;
          const __nv_bfloat16 hi = __float2bfloat16(p[2 * h + i]);
          probs[q * tile + t] = hi;
          plo[q * tile + t] = __float2bfloat16(p[2 * h + i] - __bfloat162float(hi));
        }
      }
      ps[i] = p[i] + p[2 + i];
      ps[i] += __shfl_xor_sync(0xffffffffu, ps[i], 4);
      ps[i] += __shfl_xor_sync(0xffffffffu, ps[i], 8);
      ps[i] += __shfl_xor_sync(0xffffffffu, ps[i], 16);
      if (lane < 4 && q < group) lsum[warp * group + q] = ps[i];
      l[i] *= alpha[i];
    }
#pragma unroll
    for (int mt = 0; mt < mtiles; ++mt)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        o[mt][x] *= alpha[x % 2];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (q0 + i < group)
#pragma unroll
        for (int w = 0; w < warps; ++w)
          l[i] += lsum[w * group + q0 + i];
#pragma unroll
    for (int kk = 0; kk < tile / 16; ++kk) {
      unsigned bh0 = 0u, bh1 = 0u, bl0 = 0u, bl1 = 0u;
      if (qn < group) {
        const int at = qn * tile + kk * 16 + q0;
        bh0 = *reinterpret_cast<const unsigned*>(probs + at);
        bh1 = *reinterpret_cast<const unsigned*>(probs + at + 8);
        bl0 = *reinterpret_cast<const unsigned*>(plo + at);
        bl1 = *reinterpret_cast<const unsigned*>(plo + at + 8);
      }
      const int t = kk * 16 + (lane / 16) * 8 + lane % 8;
#pragma unroll
      for (int mt = 0; mt < mtiles; ++mt) {
        const int ch = (warp * warp_dims + mt * 16) / 8 + lane / 8 % 2;
        unsigned a[4];
        ldmatrix_x4_trans(vs_addr + (t * rc + (ch ^ (t & 7))) * 16, a);
        mma_bf16(o[mt], a, bh0, bh1);
        mma_bf16(o[mt], a, bl0, bl1);
      }
    }
  }
  cp_async_wait<0>();
  constexpr int stride = head_dim + 2; // a state: m, l, o[head_dim]
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = q0 + i;
    if (q >= group) continue;
    if (warp == 0 && lane < 4) {
      out[q * stride] = m[i];
      out[q * stride + 1] = l[i];
    }
#pragma unroll
    for (int mt = 0; mt < mtiles; ++mt) {
      const int d = warp * warp_dims + mt * 16 + lane / 4;
      out[q * stride + 2 + d] = o[mt][i];
      out[q * stride + 2 + d + 8] = o[mt][2 + i];
    }
  }
}

} // namespace kg::decode
