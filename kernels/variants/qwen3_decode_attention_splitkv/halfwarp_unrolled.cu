// Variant of task qwen3_decode_attention_splitkv: the same split (fixed 256-token chunks, a
// fixed two-stage merge: bitwise reproducible, independent of the SMs available) with more bytes
// in flight per warp. In the task kernel a warp reads one token's K and V rows per step (8 bytes
// a lane) and reduces each head's dot product over 32 lanes; here each half-warp takes its own
// token (16 lanes x 16 bytes cover a 128-dim row), two tokens per half-warp are loaded before
// any is used, so a lane has 64 bytes of K and V in flight instead of 16, and a dot product
// needs 4 shuffles instead of 5. The two halves of a warp merge their online softmax states in
// a fixed order (half 0, then half 1) before the warps merge as in the task kernel.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {

constexpr int head_dim = 128, group = 4, chunk = 256, warps = 4, unroll = 2;

struct partial {
  float m[group], l[group], o[group][head_dim];
};

__device__ __forceinline__ void unpack8(const uint4& raw, float out[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Sum over the 16 lanes of a half-warp (every lane of the warp takes part).
__device__ __forceinline__ float half_sum(float v) {
  for (int off = 8; off > 0; off /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// grid (chunks, HK, B), block 128.
__global__ void attend_chunks(const __nv_bfloat16* __restrict__ q,
                              const __nv_bfloat16* __restrict__ k,
                              const __nv_bfloat16* __restrict__ v, partial* __restrict__ work,
                              int hq_total, int hk_total, int seq, float scale) {
  __shared__ partial merge[warps];
  const int c = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, half = lane / 16;
  const int d0 = (lane % 16) * 8;
  float qv[group][8];
  for (int g = 0; g < group; ++g)
    unpack8(*reinterpret_cast<const uint4*>(
                q + (static_cast<size_t>(b) * hq_total + hk * group + g) * head_dim + d0),
            qv[g]);
  float m[group], l[group], o[group][8];
  for (int g = 0; g < group; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    for (int i = 0; i < 8; ++i)
      o[g][i] = 0.0f;
  }
  const size_t base = (static_cast<size_t>(b) * hk_total + hk) * seq;
  const int t0 = c * chunk + warp * (chunk / warps);
  const int t1 = min(t0 + chunk / warps, seq);
  // Half h takes tokens t0 + h, t0 + h + 2, ...; `unroll` of them loaded before use.
  for (int t = t0 + half; t - half < t1; t += 2 * unroll) {
    uint4 kr[unroll], vr[unroll];
    bool ok[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const int tt = t + 2 * u;
      ok[u] = tt < t1;
      kr[u] = ok[u] ? __ldcs(reinterpret_cast<const uint4*>(k + (base + tt) * head_dim + d0))
                    : make_uint4(0, 0, 0, 0);
      vr[u] = ok[u] ? __ldcs(reinterpret_cast<const uint4*>(v + (base + tt) * head_dim + d0))
                    : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      float kv[8], vv[8];
      unpack8(kr[u], kv);
      unpack8(vr[u], vv);
#pragma unroll
      for (int g = 0; g < group; ++g) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i)
          s = fmaf(qv[g][i], kv[i], s);
        s = half_sum(s) * scale; // all lanes shuffle; only tokens in range update
        if (!ok[u]) continue;
        const float mn = fmaxf(m[g], s);
        const float keep = __expf(m[g] - mn), p = __expf(s - mn);
        l[g] = l[g] * keep + p;
#pragma unroll
        for (int i = 0; i < 8; ++i)
          o[g][i] = o[g][i] * keep + p * vv[i];
        m[g] = mn;
      }
    }
  }
  // Half 1's state merged into half 0's (same dims: lane and lane + 16), in that order.
  for (int g = 0; g < group; ++g) {
    const float m1 = __shfl_down_sync(0xffffffffu, m[g], 16);
    const float l1 = __shfl_down_sync(0xffffffffu, l[g], 16);
    float o1[8];
    for (int i = 0; i < 8; ++i)
      o1[i] = __shfl_down_sync(0xffffffffu, o[g][i], 16);
    if (half == 0) {
      const float mm = fmaxf(m[g], m1);
      const float f0 = m[g] == -INFINITY ? 0.0f : __expf(m[g] - mm);
      const float f1 = m1 == -INFINITY ? 0.0f : __expf(m1 - mm);
      l[g] = l[g] * f0 + l1 * f1;
      for (int i = 0; i < 8; ++i)
        o[g][i] = o[g][i] * f0 + o1[i] * f1;
      m[g] = mm;
    }
  }
  if (half == 0)
    for (int g = 0; g < group; ++g) {
      if (lane == 0) {
        merge[warp].m[g] = m[g];
        merge[warp].l[g] = l[g];
      }
      for (int i = 0; i < 8; ++i)
        merge[warp].o[g][d0 + i] = o[g][i];
    }
  __syncthreads();
  // The 4 warps merged in warp order; each of the 128 threads owns one dimension of all 4 heads.
  const int d = threadIdx.x;
  partial* out = work + ((static_cast<size_t>(b) * hk_total + hk) * gridDim.x + c);
  for (int g = 0; g < group; ++g) {
    float mm = -INFINITY;
    for (int w = 0; w < warps; ++w)
      mm = fmaxf(mm, merge[w].m[g]);
    float ll = 0.0f, oo = 0.0f;
    for (int w = 0; w < warps; ++w) {
      const float f = merge[w].m[g] == -INFINITY ? 0.0f : __expf(merge[w].m[g] - mm);
      ll += merge[w].l[g] * f;
      oo += merge[w].o[g][d] * f;
    }
    if (d == 0) {
      out->m[g] = mm;
      out->l[g] = ll;
    }
    out->o[g][d] = oo;
  }
}

// grid (HQ, B), block 128: merge the chunks of one query head in chunk order.
__global__ void merge_chunks(const partial* __restrict__ work, __nv_bfloat16* __restrict__ o,
                             int hq_total, int hk_total, int chunks) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x, hk = h / group, g = h % group;
  const partial* p = work + (static_cast<size_t>(b) * hk_total + hk) * chunks;
  float mm = -INFINITY;
  for (int c = 0; c < chunks; ++c)
    mm = fmaxf(mm, p[c].m[g]);
  float ll = 0.0f, oo = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const float f = p[c].m[g] == -INFINITY ? 0.0f : __expf(p[c].m[g] - mm);
    ll += p[c].l[g] * f;
    oo += p[c].o[g][d] * f;
  }
  o[(static_cast<size_t>(b) * hq_total + h) * head_dim + d] = __float2bfloat16(oo / ll);
}

// The workspace grows when a larger cache comes; stream-ordered allocation never synchronizes.
void* workspace = nullptr;
size_t workspace_bytes = 0;

} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 3 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[1].dtype != KG_BFLOAT16 ||
      in[2].dtype != KG_BFLOAT16 || in[0].ndim != 3 || in[1].ndim != 4 ||
      in[0].shape[2] != head_dim || in[1].shape[3] != head_dim ||
      in[0].shape[1] != group * in[1].shape[1])
    return 1;
  const int b = static_cast<int>(in[0].shape[0]), hq = static_cast<int>(in[0].shape[1]),
            hk = static_cast<int>(in[1].shape[1]), seq = static_cast<int>(in[1].shape[2]);
  const int chunks = (seq + chunk - 1) / chunk;
  const size_t need = static_cast<size_t>(b) * hk * chunks * sizeof(partial);
  if (need > workspace_bytes) {
    if (workspace && cudaFreeAsync(workspace, s) != cudaSuccess) return 3;
    if (cudaMallocAsync(&workspace, need, s) != cudaSuccess) return 3;
    workspace_bytes = need;
  }
  const float scale = 0.08838834764831845f; // 1 / sqrt(128)
  attend_chunks<<<dim3(chunks, hk, b), 32 * warps, 0, s>>>(
      static_cast<const __nv_bfloat16*>(in[0].data), static_cast<const __nv_bfloat16*>(in[1].data),
      static_cast<const __nv_bfloat16*>(in[2].data), static_cast<partial*>(workspace), hq, hk, seq,
      scale);
  merge_chunks<<<dim3(hq, b), head_dim, 0, s>>>(static_cast<const partial*>(workspace),
                                                static_cast<__nv_bfloat16*>(out[0].data), hq, hk,
                                                chunks);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
