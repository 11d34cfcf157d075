// Split-KV decode attention over the per-sequence KV cache (decode_kernels.h has the contract).
//
// Stage 1, grid (chunks of max_context, kv heads, rows), 4 warps: a block takes one 256-token
// chunk of one (row, kv head) for the `group` query heads that share it. A token's K and V rows
// are read by a team of head_dim / 8 lanes (16 bytes a lane), so a warp holds 2 (head_dim 128)
// or 4 (head_dim 64) tokens at once and a dot product needs log2(team) shuffles; two tokens per
// team are loaded before either is used, to keep more bytes in flight. Each team runs an online
// softmax over its tokens; the teams then merge in team order through shared memory.
// Stage 2, grid (q heads, rows): the chunks of a row merge in chunk order.
// Both orders are fixed by the length alone: bitwise reproducible on any set of SMs.
#include <cmath>

#include "kernels/decode/decode_kernels.h"

namespace kg::decode {
namespace {

constexpr int warps = 4, threads = warps * 32, unroll = 2;

__device__ __forceinline__ void unpack8(const uint4& raw, float out[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Merge factor of a partial softmax state with max m into the running max mm (0 when empty).
__device__ __forceinline__ float rescale(float m, float mm) {
  return m == -INFINITY ? 0.0f : expf(m - mm);
}

template <int head_dim, int group>
__global__ void __launch_bounds__(threads)
    attend_chunks(const __nv_bfloat16* __restrict__ q, std::int64_t q_row_stride,
                  const __nv_bfloat16* __restrict__ kc, const __nv_bfloat16* __restrict__ vc,
                  const int* __restrict__ slots, const int* __restrict__ lengths,
                  float* __restrict__ work, int kv_heads, int max_context, float scale) {
  constexpr int team = head_dim / 8, teams_per_warp = 32 / team, teams = warps * teams_per_warp;
  constexpr int stride = head_dim + 2; // a state: m, l, o[head_dim]
  __shared__ float st[teams][group][stride];
  const int c = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int len = lengths[b];
  if (c * attention_chunk >= len) return; // past this row's length: never read by stage 2
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tm = lane / team, d0 = (lane % team) * 8, my_team = warp * teams_per_warp + tm;

  float qv[group][8];
#pragma unroll
  for (int g = 0; g < group; ++g)
    unpack8(*reinterpret_cast<const uint4*>(
                q + b * q_row_stride + static_cast<std::int64_t>(hk * group + g) * head_dim + d0),
            qv[g]);
  float m[group], l[group], o[group][8];
#pragma unroll
  for (int g = 0; g < group; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      o[g][i] = 0.0f;
  }
  const std::size_t base =
      (static_cast<std::size_t>(slots[b]) * kv_heads + hk) * static_cast<std::size_t>(max_context);
  const int t0 = c * attention_chunk + warp * (attention_chunk / warps);
  const int t1 = min(t0 + attention_chunk / warps, len);
  // The loop bound is the same for every lane of the warp: all lanes reach every shuffle.
  for (int at = t0; at < t1; at += unroll * teams_per_warp) {
    uint4 kr[unroll], vr[unroll];
    bool ok[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const int t = at + u * teams_per_warp + tm;
      ok[u] = t < t1;
      const std::size_t off = (base + (ok[u] ? t : t0)) * head_dim + d0;
      kr[u] = ok[u] ? __ldcs(reinterpret_cast<const uint4*>(kc + off)) : make_uint4(0, 0, 0, 0);
      vr[u] = ok[u] ? __ldcs(reinterpret_cast<const uint4*>(vc + off)) : make_uint4(0, 0, 0, 0);
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
#pragma unroll
        for (int off = team / 2; off > 0; off /= 2) // within the team (aligned lane groups)
          s += __shfl_xor_sync(0xffffffffu, s, off);
        if (!ok[u]) continue;
        s *= scale;
        const float mn = fmaxf(m[g], s);
        const float keep = rescale(m[g], mn), p = expf(s - mn);
        l[g] = l[g] * keep + p;
#pragma unroll
        for (int i = 0; i < 8; ++i)
          o[g][i] = o[g][i] * keep + p * vv[i];
        m[g] = mn;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < group; ++g) {
    if (lane % team == 0) {
      st[my_team][g][0] = m[g];
      st[my_team][g][1] = l[g];
    }
#pragma unroll
    for (int i = 0; i < 8; ++i)
      st[my_team][g][2 + d0 + i] = o[g][i];
  }
  __syncthreads();
  float* out =
      work + ((static_cast<std::size_t>(b) * kv_heads + hk) * gridDim.x + c) * (group * stride);
  for (int idx = threadIdx.x; idx < group * head_dim; idx += threads) {
    const int g = idx / head_dim, d = idx % head_dim;
    float mm = -INFINITY;
    for (int t = 0; t < teams; ++t)
      mm = fmaxf(mm, st[t][g][0]);
    float ll = 0.0f, oo = 0.0f;
    for (int t = 0; t < teams; ++t) {
      const float f = rescale(st[t][g][0], mm);
      ll += st[t][g][1] * f;
      oo += st[t][g][2 + d] * f;
    }
    if (d == 0) {
      out[g * stride] = mm;
      out[g * stride + 1] = ll;
    }
    out[g * stride + 2 + d] = oo;
  }
}

// grid (q heads, rows), block head_dim: one thread per output dimension.
template <int head_dim, int group>
__global__ void merge_chunks(const float* __restrict__ work, const int* __restrict__ lengths,
                             __nv_bfloat16* __restrict__ o, int q_heads, int kv_heads,
                             int max_chunks) {
  constexpr int stride = head_dim + 2;
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x, hk = h / group, g = h % group;
  const int chunks = (lengths[b] + attention_chunk - 1) / attention_chunk;
  const float* p = work +
                   (static_cast<std::size_t>(b) * kv_heads + hk) * max_chunks * (group * stride) +
                   g * stride;
  float mm = -INFINITY;
  for (int c = 0; c < chunks; ++c)
    mm = fmaxf(mm, p[c * group * stride]);
  float ll = 0.0f, oo = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const float* s = p + c * group * stride;
    const float f = rescale(s[0], mm);
    ll += s[1] * f;
    oo += s[2 + d] * f;
  }
  o[(static_cast<std::size_t>(b) * q_heads + h) * head_dim + d] = __float2bfloat16(oo / ll);
}

int max_chunks_of(int max_context) {
  return (max_context + attention_chunk - 1) / attention_chunk;
}

template <int head_dim, int group>
cudaError_t launch_typed(const __nv_bfloat16* q, std::int64_t q_row_stride, const __nv_bfloat16* kc,
                         const __nv_bfloat16* vc, const int* slots, const int* lengths,
                         __nv_bfloat16* out, float* work, int rows, int q_heads, int kv_heads,
                         int max_context, cudaStream_t s) {
  const int chunks = max_chunks_of(max_context);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  attend_chunks<head_dim, group><<<dim3(chunks, kv_heads, rows), threads, 0, s>>>(
      q, q_row_stride, kc, vc, slots, lengths, work, kv_heads, max_context, scale);
  merge_chunks<head_dim, group>
      <<<dim3(q_heads, rows), head_dim, 0, s>>>(work, lengths, out, q_heads, kv_heads, chunks);
  return cudaGetLastError();
}

template <int head_dim>
cudaError_t launch_dim(int group, const __nv_bfloat16* q, std::int64_t q_row_stride,
                       const __nv_bfloat16* kc, const __nv_bfloat16* vc, const int* slots,
                       const int* lengths, __nv_bfloat16* out, float* work, int rows, int q_heads,
                       int kv_heads, int max_context, cudaStream_t s) {
  switch (group) {
  case 1:
    return launch_typed<head_dim, 1>(q, q_row_stride, kc, vc, slots, lengths, out, work, rows,
                                     q_heads, kv_heads, max_context, s);
  case 2:
    return launch_typed<head_dim, 2>(q, q_row_stride, kc, vc, slots, lengths, out, work, rows,
                                     q_heads, kv_heads, max_context, s);
  case 4:
    return launch_typed<head_dim, 4>(q, q_row_stride, kc, vc, slots, lengths, out, work, rows,
                                     q_heads, kv_heads, max_context, s);
  case 8:
    return launch_typed<head_dim, 8>(q, q_row_stride, kc, vc, slots, lengths, out, work, rows,
                                     q_heads, kv_heads, max_context, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

std::size_t attention_workspace_bytes(int rows, int q_heads, int kv_heads, int head_dim,
                                      int max_context) {
  if (rows < 1 || kv_heads < 1 || q_heads % kv_heads || max_context < 1) return 0;
  return static_cast<std::size_t>(rows) * q_heads * max_chunks_of(max_context) * (head_dim + 2) *
         sizeof(float);
}

cudaError_t launch_attention(const __nv_bfloat16* q, std::int64_t q_row_stride,
                             const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
                             const int* slots, const int* lengths, __nv_bfloat16* out,
                             void* workspace, int rows, int q_heads, int kv_heads, int head_dim,
                             int max_context, cudaStream_t s) {
  if (rows < 1 || kv_heads < 1 || q_heads < kv_heads || q_heads % kv_heads || max_context < 1 ||
      q_row_stride % 8 || reinterpret_cast<std::uintptr_t>(q) % 16 || !k_cache || !v_cache ||
      !slots || !lengths || !out || !workspace || kv_heads > 65535 || rows > 65535)
    return cudaErrorInvalidValue;
  const int group = q_heads / kv_heads;
  auto* work = static_cast<float*>(workspace);
  if (head_dim == 64)
    return launch_dim<64>(group, q, q_row_stride, k_cache, v_cache, slots, lengths, out, work, rows,
                          q_heads, kv_heads, max_context, s);
  if (head_dim == 128)
    return launch_dim<128>(group, q, q_row_stride, k_cache, v_cache, slots, lengths, out, work,
                           rows, q_heads, kv_heads, max_context, s);
  return cudaErrorInvalidValue;
}

} // namespace kg::decode
