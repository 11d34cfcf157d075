// Task sdpa_fp32: O = softmax(Q K^T / sqrt(D)) V per (batch, head), Q, K, V, O (B, H, S, D),
// float32, no mask. Flash-style: a block of 4 warps owns 32 queries (one per lane, its scaled q
// row and output accumulator in registers); the keys are split among the 4 warps in tiles of 4
// (K and V rows are read with warp-uniform addresses: broadcast loads). The tile loops unroll
// over the head dim: tiles of 16 took nvcc 20 s and every mutant of this file as long, 4 take 5 s
// (docs/performance.md). Each warp keeps an online
// softmax (running max, running sum, rescaled accumulator); the 4 partial states of a query are
// merged in shared memory at the end. Head dims up to 128 (instantiated for 64 and 128).
#include <cmath>

#include "kg_candidate.h"

namespace {
constexpr int warps = 4, threads = 32 * warps, tile = 4;

template <int DMAX>
__global__ void __launch_bounds__(threads)
    sdpa_kernel(const float* __restrict__ q, const float* __restrict__ k,
                const float* __restrict__ v, float* __restrict__ o, int64_t seq, int d,
                float scale) {
  __shared__ float part_m[warps][32], part_l[warps][32];
  __shared__ float merged[32][DMAX + 1];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t head = blockIdx.y;
  const float* qh = q + head * seq * d;
  const float* kh = k + head * seq * d;
  const float* vh = v + head * seq * d;
  const int64_t qi = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  const bool active = qi < seq;
  float qr[DMAX], acc[DMAX];
#pragma unroll
  for (int c = 0; c < DMAX; ++c) {
    qr[c] = active && c < d ? qh[qi * d + c] * scale : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = static_cast<int64_t>(warp) * tile; j0 < seq; j0 += warps * tile) {
    float sc[tile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int t = 0; t < tile; ++t) {
      const int64_t j = j0 + t;
      float dot = -INFINITY;
      if (j < seq) {
        dot = 0.0f;
#pragma unroll
        for (int c = 0; c < DMAX; ++c)
          if (c < d) dot += qr[c] * kh[j * d + c];
      }
      sc[t] = dot;
      tile_max = fmaxf(tile_max, dot);
    }
    const float m_new = fmaxf(m, tile_max); // finite: key j0 < seq exists
    const float rescale = expf(m - m_new);  // 0 on the first tile (m = -inf)
    l *= rescale;
#pragma unroll
    for (int c = 0; c < DMAX; ++c)
      acc[c] *= rescale;
#pragma unroll
    for (int t = 0; t < tile; ++t) {
      const int64_t j = j0 + t;
      if (j < seq) {
        const float p = expf(sc[t] - m_new);
        l += p;
#pragma unroll
        for (int c = 0; c < DMAX; ++c)
          if (c < d) acc[c] += p * vh[j * d + c];
      }
    }
    m = m_new;
  }
  // Merge the 4 warps' states of each query: weights exp(m_w - max_w m_w).
  part_m[warp][lane] = m;
  part_l[warp][lane] = l;
  __syncthreads();
  float m_all = -INFINITY;
  for (int w = 0; w < warps; ++w)
    m_all = fmaxf(m_all, part_m[w][lane]);
  float l_all = 0.0f;
  for (int w = 0; w < warps; ++w)
    if (part_l[w][lane] > 0.0f) l_all += part_l[w][lane] * expf(part_m[w][lane] - m_all);
  const float mine = l > 0.0f ? expf(m - m_all) : 0.0f; // a warp without keys adds nothing
  for (int w = 0; w < warps; ++w) {
    if (warp == w)
#pragma unroll
      for (int c = 0; c < DMAX; ++c)
        if (c < d) merged[lane][c] = (w == 0 ? 0.0f : merged[lane][c]) + acc[c] * mine;
    __syncthreads();
  }
  if (warp == 0 && active) {
    const float inv = 1.0f / l_all;
    for (int c = 0; c < d; ++c)
      o[head * seq * d + qi * d + c] = merged[lane][c] * inv;
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 3 || n_out != 1 || out[0].dtype != KG_FLOAT32 || out[0].ndim != in[0].ndim ||
      in[0].ndim < 2)
    return 1;
  const int nd = in[0].ndim;
  for (int t = 0; t < 3; ++t) {
    if (in[t].dtype != KG_FLOAT32 || in[t].ndim != nd) return 1;
    for (int x = 0; x < nd; ++x)
      if (in[t].shape[x] != in[0].shape[x] || out[0].shape[x] != in[0].shape[x]) return 1;
  }
  const int64_t seq = in[0].shape[nd - 2], d = in[0].shape[nd - 1];
  int64_t heads = 1;
  for (int x = 0; x < nd - 2; ++x)
    heads *= in[0].shape[x];
  if (d < 1 || d > 128 || heads > 65535) return 3; // head dims up to 128; grid y limit
  if (seq == 0 || heads == 0) return 0;
  const dim3 grid(static_cast<unsigned>((seq + 31) / 32), static_cast<unsigned>(heads));
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const auto* pq = static_cast<const float*>(in[0].data);
  const auto* pk = static_cast<const float*>(in[1].data);
  const auto* pv = static_cast<const float*>(in[2].data);
  auto* po = static_cast<float*>(out[0].data);
  if (d <= 64)
    sdpa_kernel<64><<<grid, threads, 0, s>>>(pq, pk, pv, po, seq, static_cast<int>(d), scale);
  else
    sdpa_kernel<128><<<grid, threads, 0, s>>>(pq, pk, pv, po, seq, static_cast<int>(d), scale);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
