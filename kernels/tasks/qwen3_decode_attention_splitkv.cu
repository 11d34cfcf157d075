// Task qwen3_decode_attention_splitkv: o[b, h] = softmax(scale q[b, h] . K[b, h / 4]) V[b, h / 4]
// for one query token per head (GQA 4:1, head_dim 128), split over the KV cache.
//
// Stage 1: the cache of each (batch, kv head) is cut into chunks of a fixed 256 tokens -- the
// split depends only on the sequence length, never on how many SMs are free, so the same inputs
// reduce in the same order on a whole GPU and on a partition. A block (4 warps) takes one chunk
// for the 4 query heads sharing the kv head; each warp runs an online softmax over its quarter
// of the chunk (lanes own 4 of the 128 dimensions), the warps merge in a fixed order, and the
// block writes (max, sum, unnormalized output) per query head to a workspace.
// Stage 2: one block per (batch, query head) merges the chunks in chunk order: a fixed two-stage
// reduction, bitwise reproducible run to run.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {

constexpr int head_dim = 128, group = 4, chunk = 256, warps = 4;

struct partial {
  float m[group], l[group], o[group][head_dim];
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ void load4(const __nv_bfloat16* p, float out[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p); // 4 bf16 = 8 bytes
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  out[0] = a.x;
  out[1] = a.y;
  out[2] = b.x;
  out[3] = b.y;
}

// grid (chunks, HK, B), block 128.
__global__ void attend_chunks(const __nv_bfloat16* __restrict__ q,
                              const __nv_bfloat16* __restrict__ k,
                              const __nv_bfloat16* __restrict__ v, partial* __restrict__ work,
                              int hq_total, int hk_total, int seq, float scale) {
  __shared__ partial merge[warps];
  const int c = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, d0 = lane * 4;
  float qv[group][4];
  for (int g = 0; g < group; ++g)
    load4(q + (static_cast<size_t>(b) * hq_total + hk * group + g) * head_dim + d0, qv[g]);
  float m[group], l[group], o[group][4];
  for (int g = 0; g < group; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    for (int i = 0; i < 4; ++i)
      o[g][i] = 0.0f;
  }
  const size_t base = (static_cast<size_t>(b) * hk_total + hk) * seq;
  const int t0 = c * chunk + warp * (chunk / warps);
  const int t1 = min(t0 + chunk / warps, seq);
  for (int t = t0; t < t1; ++t) {
    float kv[4], vv[4];
    load4(k + (base + t) * head_dim + d0, kv);
    load4(v + (base + t) * head_dim + d0, vv);
    for (int g = 0; g < group; ++g) {
      float s = qv[g][0] * kv[0] + qv[g][1] * kv[1] + qv[g][2] * kv[2] + qv[g][3] * kv[3];
      s = warp_sum(s) * scale;
      const float mn = fmaxf(m[g], s);
      const float keep = __expf(m[g] - mn), p = __expf(s - mn);
      l[g] = l[g] * keep + p;
      for (int i = 0; i < 4; ++i)
        o[g][i] = o[g][i] * keep + p * vv[i];
      m[g] = mn;
    }
  }
  for (int g = 0; g < group; ++g) {
    if (lane == 0) {
      merge[warp].m[g] = m[g];
      merge[warp].l[g] = l[g];
    }
    for (int i = 0; i < 4; ++i)
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
