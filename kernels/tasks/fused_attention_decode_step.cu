// Task fused_attention_decode_step: o[b, h] = softmax(scale * q[b, h] . k[b, g, s]) @ v[b, g, s]
// with g = h / (HQ / HK) (grouped-query attention), head_dim 128, bfloat16 in and out, float32
// math. One block per (batch, kv head) reads its K and V once for all the query heads of the
// group. Each warp walks every warps-th group of `unroll` keys with an online softmax (lane l
// holds dims 4l..4l+3); the warps' partial (max, sum, accumulator) are merged at the end.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
constexpr int head_dim = 128, warps = 16, threads = warps * 32, unroll = 4, max_group = 4;
constexpr float scale = 0.08838834764831845f; // the task's params.scale, 1/sqrt(128)

__device__ void load4(const __nv_bfloat16* p, float* v) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const auto* e = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    v[j] = __bfloat162float(e[j]);
}

template <int group>
__global__ void __launch_bounds__(threads)
    decode_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                  const __nv_bfloat16* __restrict__ vc, __nv_bfloat16* __restrict__ o, int64_t hk,
                  int64_t S) {
  __shared__ float part_m[warps][group], part_l[warps][group];
  __shared__ float part_acc[warps][group][head_dim];
  const int64_t bg = blockIdx.x; // b * hk + g
  const int64_t hq = hk * group, b = bg / hk, g = bg % hk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const __nv_bfloat16* kb = kc + bg * S * head_dim + lane * 4;
  const __nv_bfloat16* vb = vc + bg * S * head_dim + lane * 4;
  float qf[group][4], acc[group][4], m[group], l[group];
#pragma unroll
  for (int i = 0; i < group; ++i) {
    load4(q + ((b * hq + g * group + i) * head_dim) + lane * 4, qf[i]);
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      acc[i][j] = 0.0f;
  }
  for (int64_t s0 = static_cast<int64_t>(warp) * unroll; s0 < S; s0 += warps * unroll) {
    // All loads of the group of keys first: several rows in flight per warp.
    float kf[unroll][4], vf[unroll][4];
#pragma unroll
    for (int u = 0; u < unroll; ++u)
      if (s0 + u < S) {
        load4(kb + (s0 + u) * head_dim, kf[u]);
        load4(vb + (s0 + u) * head_dim, vf[u]);
      }
#pragma unroll
    for (int i = 0; i < group; ++i) {
      float dot[unroll];
#pragma unroll
      for (int u = 0; u < unroll; ++u)
        dot[u] = s0 + u < S ? qf[i][0] * kf[u][0] + qf[i][1] * kf[u][1] + qf[i][2] * kf[u][2] +
                                  qf[i][3] * kf[u][3]
                            : 0.0f;
      for (int off = 16; off > 0; off /= 2)
#pragma unroll
        for (int u = 0; u < unroll; ++u)
          dot[u] += __shfl_xor_sync(0xffffffffu, dot[u], off);
#pragma unroll
      for (int u = 0; u < unroll; ++u) {
        if (s0 + u >= S) break;
        const float score = dot[u] * scale, mn = fmaxf(m[i], score);
        const float alpha = expf(m[i] - mn), p = expf(score - mn); // expf(-inf) = 0 at the start
        l[i] = l[i] * alpha + p;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] = acc[i][j] * alpha + p * vf[u][j];
        m[i] = mn;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < group; ++i) {
    if (lane == 0) {
      part_m[warp][i] = m[i];
      part_l[warp][i] = l[i];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      part_acc[warp][i][lane * 4 + j] = acc[i][j];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < group * head_dim; t += threads) {
    const int i = t / head_dim, d = t % head_dim;
    float mx = -INFINITY;
    for (int w = 0; w < warps; ++w)
      mx = fmaxf(mx, part_m[w][i]);
    float sum = 0.0f, out = 0.0f;
    for (int w = 0; w < warps; ++w)
      if (part_m[w][i] != -INFINITY) { // a warp that saw no key (S < warps * unroll) adds nothing
        const float f = expf(part_m[w][i] - mx);
        sum += part_l[w][i] * f;
        out += part_acc[w][i][d] * f;
      }
    o[(b * hq + g * group + i) * head_dim + d] = __float2bfloat16(out / sum);
  }
}

bool is_bf16(const kg_tensor& t, int ndim) {
  return t.dtype == KG_BFLOAT16 && t.ndim == ndim;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 3 || n_out != 1 || !is_bf16(in[0], 3) || !is_bf16(in[1], 4) || !is_bf16(in[2], 4) ||
      !is_bf16(out[0], 3))
    return 1;
  const int64_t B = in[0].shape[0], HQ = in[0].shape[1], HK = in[1].shape[1], S = in[1].shape[2];
  if (B < 1 || HK < 1 || S < 1 || HQ % HK != 0 || HQ / HK > max_group || B * HK > 2147483647 ||
      in[0].shape[2] != head_dim)
    return 1;
  for (int d = 0; d < 4; ++d)
    if (in[2].shape[d] != in[1].shape[d]) return 1;
  if (in[1].shape[0] != B || in[1].shape[3] != head_dim) return 1;
  for (int d = 0; d < 3; ++d)
    if (out[0].shape[d] != in[0].shape[d]) return 1;
  const auto* q = static_cast<const __nv_bfloat16*>(in[0].data);
  const auto* k = static_cast<const __nv_bfloat16*>(in[1].data);
  const auto* v = static_cast<const __nv_bfloat16*>(in[2].data);
  auto* o = static_cast<__nv_bfloat16*>(out[0].data);
  const unsigned blocks = static_cast<unsigned>(B * HK);
  switch (HQ / HK) {
  case 1:
    decode_kernel<1><<<blocks, threads, 0, s>>>(q, k, v, o, HK, S);
    break;
  case 2:
    decode_kernel<2><<<blocks, threads, 0, s>>>(q, k, v, o, HK, S);
    break;
  case 3:
    decode_kernel<3><<<blocks, threads, 0, s>>>(q, k, v, o, HK, S);
    break;
  default:
    decode_kernel<4><<<blocks, threads, 0, s>>>(q, k, v, o, HK, S);
    break;
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
