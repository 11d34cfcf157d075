// Split-KV decode attention over the per-sequence KV cache (decode_kernels.h has the contract,
// attention_config.h how a sequence is split).
//
// Stage 1, grid (attention_max_chunks(max_context), kv heads, rows), 4 warps (or 8:
// attention_config::warps): a block takes one chunk of one (row, kv head) for the `group` query
// heads that share it. The chunk's length comes from the row's length alone
// (attention_chunk_tokens), computed here on the device, so a graph captured for a batch size
// serves every length; blocks past a row's last chunk return at once and their workspace slots
// are never read.
//
// Why this shape (the kernel it replaced, one team of lanes per token with an online softmax per
// token, stayed far below the copy bandwidth: docs/performance.md, Decode attention):
//  - Bytes in flight: K and V tiles of `tile` tokens stream into shared memory with cp.async
//    (16 bytes a thread, L1 bypassed: every byte is read once), `stages - 1` tiles ahead of the
//    one being used, so a block keeps 2 x (stages - 1) x tile x head_dim x 2 bytes outstanding
//    (16 KiB for 32 tokens x 128 dims x 2 stages) while it computes.
//  - No per-token serial work: in the score phase 4 threads share a token's dot product (32
//    dimensions each for head_dim 128; the 4 partial sums meet by two shuffles per tile, not per
//    token), a tile's maximum is taken once per query head, the running softmax state is
//    rescaled once per tile, and the V phase gives each thread 8 dimensions of every query head
//    for a fixed subset of the tile's tokens (one 16-byte shared load of V feeds 8 x group FMAs).
//  - Shared memory rows are swizzled (16-byte chunk index XOR the token's low 3 bits) so the
//    score phase (8 lanes = 8 tokens at one chunk) and the V phase (8 lanes = 8 chunks of one
//    token) both read without bank conflicts.
//  - Short sequences still fill the GPU: the chunk shrinks with the length (batch 1, 2048
//    tokens: 16 chunks of 128 tokens per kv head, 128 blocks instead of 64).
// That is the FMA path (fma_chunk). With attention_config::tensor_cores, the engine's pick, the
// same ring and loads feed mma.sync tiles instead (tc_chunk, attention_tc.cuh).
// The scores are kept in log2 units (q pre-scaled by log2(e) / sqrt(D)) so exp2f does the
// softmax. Inside a block every thread computes the same running maximum from shared memory, so
// the partial sums of the V phase's token groups share one scale and merge by plain addition,
// in token-group order.
//
// Stage 2, grid (q heads, rows), head_dim threads: a row's chunks merge in chunk order. With
// config.pdl it is launched as a programmatic dependent of stage 1 (its blocks may be scheduled
// while stage 1 drains; griddepcontrol.wait holds them until stage 1 has completed and its
// writes are visible), which hides one launch latency -- worth a few microseconds when the whole
// attention takes ten.
//
// Every order of summation is fixed by the lengths and the configuration alone, no atomics:
// the bits do not depend on which SMs run the blocks or where a row sits in the batch.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/decode/attention_tc.cuh"
#include "kernels/decode/cp_async.cuh"
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/decode_math.cuh"
#include "kernels/decode/kv_block.cuh"
#include "kernels/decode/programmatic_launch.cuh"

namespace kg::decode {
namespace {

constexpr int parts = 4; // threads sharing one token's dot product in the score phase
// Stage 1 grids of at most this many blocks get one block per SM (launch_typed).
constexpr int one_wave_blocks = 132;
constexpr int one_block_per_sm_bytes = 116 * 1024; // over half of the H200's 228 KiB an SM
constexpr double log2e = 1.4426950408889634;       // scores in log2 units: exp2f in the softmax

// n bf16 pairs (the words of a 16- or 8-byte load) as 2 n floats.
template <int n>
__device__ __forceinline__ void unpack_pairs(const __nv_bfloat162* h, float* out) {
#pragma unroll
  for (int i = 0; i < n; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void unpack8(const uint4& raw, float out[8]) {
  unpack_pairs<4>(reinterpret_cast<const __nv_bfloat162*>(&raw), out);
}

// `dpt` (8 or 4) consecutive bf16 of a V row in shared memory (16- or 8-byte aligned) as floats.
template <int dpt>
__device__ __forceinline__ void load_v(const __nv_bfloat16* p, float (&out)[dpt]) {
  if constexpr (dpt == 8) {
    unpack8(*reinterpret_cast<const uint4*>(p), out);
  } else {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    unpack_pairs<2>(reinterpret_cast<const __nv_bfloat162*>(&raw), out);
  }
}

// Everything both stages need, passed through the dispatch by value.
struct attention_call {
  const __nv_bfloat16 *q, *kc, *vc;
  std::int64_t q_row_stride;
  const int *slots, *lengths, *capacities;
  __nv_bfloat16* out;
  float* work;
  unsigned* counters; // [rows][kv heads], merging launches only (attention_args::counters)
  int rows, q_heads, kv_heads, max_context, max_chunks;
  float scale_log2;
  attention_config cfg;
  // The prologue folded in (launch_attention_fused; `fused` kernels only): q points at the raw
  // qkv row ([q heads | k heads | v heads]); each block normalizes and rotates its own q heads,
  // and the block whose chunk holds position len - 1 also makes that token's k (normalized,
  // rotated) and v and appends them to kc_out / vc_out.
  const __nv_bfloat16 *q_w, *k_w;
  float eps;
  double log_theta;
  __nv_bfloat16 *kc_out, *vc_out;
};

// Stage 1's shared memory (bytes): the K/V tile ring, reused after the loop for the token
// groups' partial outputs; then q (float, log2-scaled), the warps' tile maxima, the tile's
// probabilities. `warps` (attention_config::warps): 4, or 8, which splits each (token group,
// chunk) of the V phase between two threads of 4 dimensions (dims_per_thread) and keeps the
// 4-warp block's token groups, so every sum has the same terms in the same order: the same bits.
template <int head_dim, int group, int tile, int stages, int warps>
struct stage1_layout {
  static constexpr int threads = warps * 32;
  static constexpr int row_chunks = head_dim / 8;          // 16-byte chunks per K or V row
  static constexpr int token_groups = 4 * 32 / row_chunks; // V phase: the 4-warp block's
  static constexpr int dims_per_thread = 8 * token_groups * row_chunks / threads;
  static constexpr int ring = stages * 2 * tile * head_dim * 2; // K then V, per stage
  static constexpr int reduce = token_groups * group * (head_dim + 1) * 4; // o, then l
  static constexpr int area = ring > reduce ? ring : reduce;
  static constexpr int q_off = area;
  static constexpr int wmax_off = q_off + group * head_dim * 4;
  static constexpr int probs_off = wmax_off + warps * group * 4; // tensor cores: P^T hi, lo
  static constexpr int lsum_off = probs_off + tile * group * 4;  // tensor cores: warps' sums
  static constexpr int bytes = lsum_off + warps * group * 4;
  static_assert(tile % (8 * warps) == 0 && (tile * row_chunks) % threads == 0 &&
                tile % token_groups == 0 && row_chunks % parts == 0 &&
                (dims_per_thread == 8 || dims_per_thread == 4));
};

template <int group>
__device__ __forceinline__ void load_probs(const float* p, float e[group]) {
  if constexpr (group % 4 == 0) {
#pragma unroll
    for (int g = 0; g < group; g += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + g);
      e[g] = v.x;
      e[g + 1] = v.y;
      e[g + 2] = v.z;
      e[g + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int g = 0; g < group; ++g)
      e[g] = p[g];
  }
}

// The fused prologue's work for one head of a row, by one warp, as prologue_kernel
// (qk_norm_rope_append.cu) does it for its (row, head): lane j holds elements j + 32 t. A q or k
// head is normalized (weight w) and rotated with the lane's (c, s); a v head (w null) is copied.
// The bits are that kernel's: the same operations in the same order (decode_math.cuh).
template <int per_lane>
__device__ __forceinline__ void
prologue_head(const __nv_bfloat16* src, const __nv_bfloat16 (&w)[per_lane], bool rotate,
              const float (&c)[per_lane / 2], const float (&s)[per_lane / 2], int lane, float eps,
              __nv_bfloat16 (&out)[per_lane]) {
  constexpr int head_dim = per_lane * 32, half = per_lane / 2;
  float v[per_lane];
#pragma unroll
  for (int t = 0; t < per_lane; ++t)
    v[t] = __bfloat162float(src[lane + 32 * t]);
  if (!rotate) {
#pragma unroll
    for (int t = 0; t < per_lane; ++t)
      out[t] = __float2bfloat16(v[t]); // exact: v came from bf16
    return;
  }
  float ss = 0.0f;
#pragma unroll
  for (int t = 0; t < per_lane; ++t)
    ss = __fmaf_rn(v[t], v[t], ss);
  const float inv = kg::decode::math::inv_rms(kg::decode::math::warp_sum(ss), head_dim, eps);
#pragma unroll
  for (int t = 0; t < per_lane; ++t)
    v[t] = __bfloat162float(kg::decode::math::scale_round(v[t], inv, w[t]));
#pragma unroll
  for (int t = 0; t < half; ++t)
    kg::decode::math::rope_rotate(v[t], v[t + half], c[t], s[t], &out[t], &out[t + half]);
}

// One output of a (row, q head): its `chunks` chunk states merged in chunk order, m(c), l(c) and
// o(c) giving chunk c's maximum, sum and output element. Stage 2 (merge_chunks) and the merge in
// stage 1 (merge_if_last) do exactly these operations in this order, so both give the same bits.
// `unrolled` > 0: chunks <= unrolled, the loops unrolled (the accessors may then index registers).
template <int unrolled, typename M, typename L, typename O>
__device__ __forceinline__ __nv_bfloat16 merged_output(int chunks, M m, L l, O o) {
  float mm = -INFINITY, ll = 0.0f, oo = 0.0f;
  const auto add = [&](int c) {
    const float f = exp2f(m(c) - mm); // every chunk holds a token: m is finite
    ll = fmaf(l(c), f, ll);
    oo = fmaf(o(c), f, oo);
  };
  if constexpr (unrolled > 0) {
#pragma unroll
    for (int c = 0; c < unrolled; ++c)
      if (c < chunks) mm = fmaxf(mm, m(c));
#pragma unroll
    for (int c = 0; c < unrolled; ++c)
      if (c < chunks) add(c);
  } else {
    for (int c = 0; c < chunks; ++c)
      mm = fmaxf(mm, m(c));
    for (int c = 0; c < chunks; ++c)
      add(c);
  }
  return __float2bfloat16(oo / ll);
}

// The merge in stage 1 (attention_config::merge_in_stage1), after the block's chunk state is
// stored: the block counts itself on its (row, kv head)'s counter, and the last of the row's
// `chunks` blocks stages every chunk's state in shared memory -- 16-byte cp.async copies from L2
// (other SMs wrote them; L1 is bypassed), all issued before any is used: one round trip, where
// a load per output and chunk would take several -- then merges them as stage 2 does and leaves
// the counter at 0 for the next launch. The fences: this block's state is visible device-wide
// before its arrival is counted, and the last block's reads come after its observation of the
// count. A state is group x (head_dim + 2) floats, a multiple of 4 for an even group
// (attention_merges_in_stage1 asks for one), so every chunk's state is 16-byte aligned.
template <int head_dim, int group>
__device__ __forceinline__ void merge_if_last(const attention_call& a, int b, int hk, int chunks,
                                              unsigned char* smem) {
  static_assert(group % 2 == 0, "a chunk state of an odd group is not 16-byte aligned");
  __shared__ bool is_last;
  unsigned* counter = a.counters + static_cast<std::size_t>(b) * a.kv_heads + hk;
  __threadfence();
  __syncthreads(); // also: every thread is done with the shared memory reused below
  if (threadIdx.x == 0) is_last = atomicAdd(counter, 1u) == static_cast<unsigned>(chunks - 1);
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  constexpr int stride = head_dim + 2, state = group * stride; // floats: one head, one chunk
  const float* src =
      a.work + (static_cast<std::size_t>(b) * a.kv_heads + hk) * a.max_chunks * state;
  auto* staged = reinterpret_cast<float*>(smem);
  const int quads = chunks * state / 4;
  for (int i = threadIdx.x; i < quads; i += blockDim.x)
    cp_async16(staged + 4 * i, src + 4 * i, true);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < group * head_dim; i += blockDim.x) {
    const int g = i / head_dim, d = i % head_dim;
    const float* head = staged + g * stride;
    a.out[(static_cast<std::size_t>(b) * a.q_heads + hk * group + g) * head_dim + d] =
        merged_output<0>(
            chunks, [&](int c) { return head[c * state]; },
            [&](int c) { return head[c * state + 1]; },
            [&](int c) { return head[c * state + 2 + d]; });
  }
  if (threadIdx.x == 0) *counter = 0;
}

// Stage 1's tiles on the CUDA cores (the FMA path; 4 or 8 warps), their state written to out.
template <int head_dim, int group, int tile, int stages, int warps, typename Begin>
__device__ __forceinline__ void fma_chunk(unsigned char* smem, int tiles, int c0, int c1,
                                          Begin begin_tile, float* out) {
  using L = stage1_layout<head_dim, group, tile, stages, warps>;
  constexpr int threads = L::threads, rc = L::row_chunks, tgs = L::token_groups;
  constexpr int dpt = L::dims_per_thread, per_thread = tile / (8 * warps);
  const int tid = threadIdx.x;
  const auto* ring = reinterpret_cast<const __nv_bfloat16*>(smem);
  const auto* qs = reinterpret_cast<const float*>(smem + L::q_off);
  auto* wmax = reinterpret_cast<float*>(smem + L::wmax_off);
  auto* probs = reinterpret_cast<float*>(smem + L::probs_off);
  float m[group], l[group], o[group][dpt];
#pragma unroll
  for (int g = 0; g < group; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int x = 0; x < dpt; ++x)
      o[g][x] = 0.0f;
  }
  // V phase: chunk dc of token group tg, its dimensions half * dpt .. + dpt (half 0 with 4 warps).
  const int part = (tid / 8) % parts, dc = tid % rc, tg = (tid % 128) / rc, half = tid / 128;
  for (int k = 0; k < tiles; ++k) {
    begin_tile(k);
    const __nv_bfloat16* ks = ring + (k % stages) * 2 * tile * head_dim;
    const __nv_bfloat16* vs = ks + tile * head_dim;
    const int tok0 = c0 + k * tile;

    // Scores: token t of the tile by the 4 threads (tid / 8) % 4 of its lane octet, each over
    // the chunks ch = j * 4 + part; a warp takes 8 tokens, so with 64-token tiles and 4 warps a
    // thread takes tokens t and t + 32, and each q load serves both (8 warps: one token each).
    float s[per_thread][group];
#pragma unroll
    for (int r = 0; r < per_thread; ++r)
#pragma unroll
      for (int g = 0; g < group; ++g)
        s[r][g] = 0.0f;
#pragma unroll
    for (int j = 0; j < rc / parts; ++j) {
      const int ch = j * parts + part;
      float kf[per_thread][8];
#pragma unroll
      for (int r = 0; r < per_thread; ++r) {
        const int t = tid % 8 + 8 * (tid / 32) + 8 * warps * r;
        unpack8(*reinterpret_cast<const uint4*>(ks + (t * rc + (ch ^ (t & 7))) * 8), kf[r]);
      }
#pragma unroll
      for (int g = 0; g < group; ++g) {
        const float4 q0 = *reinterpret_cast<const float4*>(qs + g * head_dim + ch * 8);
        const float4 q1 = *reinterpret_cast<const float4*>(qs + g * head_dim + ch * 8 + 4);
#pragma unroll
        for (int r = 0; r < per_thread; ++r) {
          float v = s[r][g];
          v = fmaf(kf[r][0], q0.x, v);
          v = fmaf(kf[r][1], q0.y, v);
          v = fmaf(kf[r][2], q0.z, v);
          v = fmaf(kf[r][3], q0.w, v);
          v = fmaf(kf[r][4], q1.x, v);
          v = fmaf(kf[r][5], q1.y, v);
          v = fmaf(kf[r][6], q1.z, v);
          v = fmaf(kf[r][7], q1.w, v);
          s[r][g] = v;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < per_thread; ++r) {
      const bool valid = tok0 + tid % 8 + 8 * (tid / 32) + 8 * warps * r < c1;
#pragma unroll
      for (int g = 0; g < group; ++g) {
        // a + b is commutative in IEEE arithmetic: the 4 threads of a token end with equal bits.
        s[r][g] += __shfl_xor_sync(0xffffffffu, s[r][g], 8);
        s[r][g] += __shfl_xor_sync(0xffffffffu, s[r][g], 16);
        if (!valid) s[r][g] = -INFINITY;
      }
    }
    // The tile's maximum per query head: over the warp's tokens (lane bits 0-2), then the warps.
#pragma unroll
    for (int g = 0; g < group; ++g) {
      float mx = s[0][g];
#pragma unroll
      for (int r = 1; r < per_thread; ++r)
        mx = fmaxf(mx, s[r][g]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      if (tid % 32 == 0) wmax[(tid / 32) * group + g] = mx;
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < group; ++g) {
      float tm = wmax[g];
#pragma unroll
      for (int w = 1; w < warps; ++w)
        tm = fmaxf(tm, wmax[w * group + g]);
      // Every tile holds a valid token, so mn is finite; alpha is 0 on the first tile (m = -inf)
      // and exactly 1 while the maximum stands.
      const float mn = fmaxf(m[g], tm), alpha = exp2f(m[g] - mn);
      m[g] = mn;
      l[g] *= alpha;
#pragma unroll
      for (int x = 0; x < dpt; ++x)
        o[g][x] *= alpha;
      if (part == 0)
#pragma unroll
        for (int r = 0; r < per_thread; ++r)
          probs[(tid % 8 + 8 * (tid / 32) + 8 * warps * r) * group + g] = exp2f(s[r][g] - mn);
    }
    __syncthreads();
    // V: dimensions dc * 8 + half * dpt .. + dpt of every query head, tokens tg, tg + tgs, ...
#pragma unroll
    for (int i = 0; i < tile / tgs; ++i) {
      const int t = tg + tgs * i;
      float vf[dpt], e[group];
      load_v<dpt>(vs + (t * rc + (dc ^ (t & 7))) * 8 + half * dpt, vf);
      load_probs<group>(probs + t * group, e);
#pragma unroll
      for (int g = 0; g < group; ++g) {
        l[g] += e[g];
#pragma unroll
        for (int x = 0; x < dpt; ++x)
          o[g][x] = fmaf(e[g], vf[x], o[g][x]);
      }
    }
  }

  // The token groups' partial outputs share the block's maximum: they add up, in group order.
  cp_async_wait<0>();
  __syncthreads(); // every V read done: the ring becomes the reduction buffer
  float* red = reinterpret_cast<float*>(smem); // [tgs][group][head_dim], then l [tgs][group]
  float* lred = red + tgs * group * head_dim;
#pragma unroll
  for (int g = 0; g < group; ++g) {
    float* p = red + (tg * group + g) * head_dim + dc * 8 + half * dpt;
#pragma unroll
    for (int x = 0; x < dpt; x += 4)
      *reinterpret_cast<float4*>(p + x) =
          make_float4(o[g][x], o[g][x + 1], o[g][x + 2], o[g][x + 3]);
    if (dc == 0 && half == 0) lred[tg * group + g] = l[g]; // (both halves hold the same l)
  }
  __syncthreads();
  constexpr int stride = head_dim + 2; // a state: m, l, o[head_dim]
  if (tid == 0)
#pragma unroll
    for (int g = 0; g < group; ++g)
      out[g * stride] = m[g];
  for (int i = tid; i < group * head_dim; i += threads) {
    const int g = i / head_dim, d = i % head_dim;
    float acc = 0.0f;
#pragma unroll
    for (int t = 0; t < tgs; ++t)
      acc += red[(t * group + g) * head_dim + d];
    out[g * stride + 2 + d] = acc;
    if (d == 0) {
      float ls = 0.0f;
#pragma unroll
      for (int t = 0; t < tgs; ++t)
        ls += lred[t * group + g];
      out[g * stride + 1] = ls;
    }
  }
}

template <int head_dim, int group, int tile, int stages, int warps, bool fused, bool merge, bool tc>
__global__ void __launch_bounds__(warps * 32) attend_chunks(const attention_call a) {
  using L = stage1_layout<head_dim, group, tile, stages, warps>;
  constexpr int threads = L::threads, rc = L::row_chunks, per_lane = head_dim / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  // Stage 2 may be scheduled once every block here has started (it waits for this grid's
  // completion before reading anything): hides its launch. A no-op without a dependent launch.
  pdl::allow_dependents();
  // Launched as a programmatic dependent itself, nothing the kernel ahead writes is read before
  // it has completed (lengths and slots come from the step's input copy, ahead of every kernel).
  // Fused, the kernel ahead is the qkv GEMV, which writes nothing in the cache: the ring's first
  // tiles, less the new token (made here), load before the programmatic wait. Unfused, nothing is
  // read before it.
  if constexpr (!fused) pdl::wait();
  const int c = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int len = a.lengths[b];
  const int chunk = attention_chunk_tokens(a.cfg, len);
  const int c0 = c * chunk;
  if (c0 >= len) return; // past this row's last chunk: never read by stage 2
  const int c1 = min(c0 + chunk, len), tiles = (c1 - c0 + tile - 1) / tile;
  const int tid = threadIdx.x;
  auto* ring = reinterpret_cast<__nv_bfloat16*>(smem);
  auto* qs = reinterpret_cast<float*>(smem + L::q_off);
  auto* wmax = reinterpret_cast<float*>(smem + L::wmax_off);
  auto* probs = reinterpret_cast<float*>(smem + L::probs_off);
  const std::size_t row0 =
      kv_head_offset(a.slots[b], a.capacities, b, a.kv_heads, hk, a.max_context) * head_dim;
  const __nv_bfloat16* kg = a.kc + row0;
  const __nv_bfloat16* vg = a.vc + row0;

  // Token `skip` is left out (no copy issued: its slot is filled later).
  auto load_tile = [&](int k, int skip) {
    __nv_bfloat16* ks = ring + (k % stages) * 2 * tile * head_dim;
    __nv_bfloat16* vs = ks + tile * head_dim;
    const int tok0 = c0 + k * tile;
#pragma unroll
    for (int u = 0; u < tile * rc / threads; ++u) {
      const int i = tid + u * threads, t = i / rc, ch = i % rc, tok = tok0 + t;
      if (tok == skip) continue;
      const bool ok = tok < c1;
      const std::size_t off = static_cast<std::size_t>(ok ? tok : c0) * head_dim + ch * 8;
      const int at = (t * rc + (ch ^ (t & 7))) * 8;
      cp_async16(ks + at, kg + off, ok);
      cp_async16(vs + at, vg + off, ok);
    }
  };
  // Fill the ring first (the loads are what takes time), then stage q while they fly. A group is
  // committed for every slot, loaded or not, so wait_group counts stay uniform.
  const int appended = fused ? len - 1 : -1;
  const int k_last = (appended - c0) / tile; // the appended token's tile, if this chunk holds it
  const bool has_token = appended >= c0 && appended < c1;
  // Fused: the per-lane norm weights and rotation of position len - 1 need nothing from the
  // kernel ahead (lengths come from the step's input copy), so they are ready before the wait.
  const int lane = tid % 32, warp_id = tid / 32;
  __nv_bfloat16 qw[per_lane], kw[per_lane];
  float rc_cos[per_lane / 2], rc_sin[per_lane / 2];
  if constexpr (fused) {
#pragma unroll
    for (int t = 0; t < per_lane; ++t) {
      qw[t] = a.q_w[lane + 32 * t];
      kw[t] = a.k_w[lane + 32 * t];
    }
#pragma unroll
    for (int t = 0; t < per_lane / 2; ++t)
      kg::decode::math::rope_cos_sin(appended, lane + 32 * t, head_dim, a.log_theta, &rc_cos[t],
                                     &rc_sin[t]);
  }
#pragma unroll
  for (int k = 0; k < stages - 1; ++k) {
    if (k < tiles) load_tile(k, appended);
    cp_async_commit();
  }
  // Fused: the token's k or v row a warp made, held until its tile's ring slot is being filled
  // (stored then with plain shared stores, which the barrier at that tile's turn publishes).
  __nv_bfloat16 held[per_lane];
  int held_kind = 0; // 0 none, 1 k, 2 v
  const auto put_token = [&](int kind, const __nv_bfloat16(&o)[per_lane]) {
    __nv_bfloat16* dst =
        ring + (k_last % stages) * 2 * tile * head_dim + (kind == 2 ? tile * head_dim : 0);
    const int t = (appended - c0) % tile;
#pragma unroll
    for (int p = 0; p < per_lane; ++p) {
      const int d = lane + 32 * p;
      dst[(t * rc + ((d / 8) ^ (t & 7))) * 8 + d % 8] = o[p];
    }
  };
  // The FMA path scales q; the tensor cores take it as bf16 and scale the scores.
  const float qscale = tc ? 1.0f : a.scale_log2;
  if constexpr (fused) {
    pdl::wait(); // the qkv GEMV is done
    const __nv_bfloat16* row = a.q + b * a.q_row_stride;
    const int jobs = group + (has_token ? 2 : 0);
    for (int j = warp_id; j < jobs; j += warps) {
      __nv_bfloat16 o[per_lane];
      if (j < group) {
        prologue_head<per_lane>(row + static_cast<std::int64_t>(hk * group + j) * head_dim, qw,
                                true, rc_cos, rc_sin, lane, a.eps, o);
#pragma unroll
        for (int p = 0; p < per_lane; ++p)
          qs[j * head_dim + lane + 32 * p] = __bfloat162float(o[p]) * qscale;
        continue;
      }
      const int kind = j - group + 1; // 1: k, 2: v
      const int head = a.q_heads + (kind == 2 ? a.kv_heads : 0) + hk;
      prologue_head<per_lane>(row + static_cast<std::int64_t>(head) * head_dim, kw, kind == 1,
                              rc_cos, rc_sin, lane, a.eps, o);
      __nv_bfloat16* cache =
          (kind == 1 ? a.kc_out : a.vc_out) + row0 + static_cast<std::size_t>(appended) * head_dim;
#pragma unroll
      for (int p = 0; p < per_lane; ++p)
        cache[lane + 32 * p] = o[p];
      if (k_last < stages - 1) {
        put_token(kind, o); // its slot is in the fill: no one else writes that row
      } else {
        held_kind = kind;
#pragma unroll
        for (int p = 0; p < per_lane; ++p)
          held[p] = o[p];
      }
    }
  }
  for (int i = tid; !fused && i < group * rc; i += threads) {
    const int g = i / rc, ch = i % rc;
    float f[8];
    unpack8(*reinterpret_cast<const uint4*>(a.q + b * a.q_row_stride +
                                            static_cast<std::int64_t>(hk * group + g) * head_dim +
                                            ch * 8),
            f);
#pragma unroll
    for (int x = 0; x < 8; ++x)
      qs[g * head_dim + ch * 8 + x] = f[x] * qscale;
  }

  // The loop's start for tile k: it has landed and every thread is done with tile k - 1's slot.
  const auto begin_tile = [&](int k) {
    cp_async_wait<stages - 2>();
    __syncthreads(); // tile k (and q) visible to all; everyone is done with tile k - 1's slot
    if (k + stages - 1 < tiles) load_tile(k + stages - 1, fused ? appended : -1);
    if (fused && held_kind && k + stages - 1 == k_last) put_token(held_kind, held);
    cp_async_commit();
  };
  constexpr int stride = head_dim + 2; // a state: m, l, o[head_dim]
  float* out = a.work + ((static_cast<std::size_t>(b) * a.kv_heads + hk) * a.max_chunks + c) *
                            (group * stride);
  if constexpr (tc) {
    tc_chunk<head_dim, group, tile, stages>(
        ring, qs, wmax, reinterpret_cast<float*>(smem + L::lsum_off),
        reinterpret_cast<__nv_bfloat16*>(probs), tiles, c0, c1, a.scale_log2, begin_tile, out);
  } else {
    fma_chunk<head_dim, group, tile, stages, warps>(smem, tiles, c0, c1, begin_tile, out);
  }
  if constexpr (merge) merge_if_last<head_dim, group>(a, b, hk, attention_chunks(a.cfg, len), smem);
}

// grid (q heads, rows), block head_dim: one thread per output dimension; chunks in order.
template <int head_dim, int group>
__global__ void merge_chunks(const attention_call a) {
  // Launched as a programmatic dependent of stage 1 (config.pdl) this waits for stage 1's
  // completion and memory; launched plainly it returns at once.
  pdl::wait();
  pdl::allow_dependents(); // the o projection: scheduled once stage 1 has left the GPU
  constexpr int stride = head_dim + 2;
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x, hk = h / group, g = h % group;
  const int chunks = attention_chunks(a.cfg, a.lengths[b]);
  const float* p =
      a.work + (static_cast<std::size_t>(b) * a.kv_heads + hk) * a.max_chunks * (group * stride) +
      g * stride;
  // Up to 16 chunks (every length of the engine's configurations): every load first -- each
  // chunk's m, l and o[d], 48 in flight -- then the plain loops' arithmetic in the same order (the
  // same bits). One round of loads shortens stage 2 in the step; a loop of 16-chunk rounds for
  // any count did not beat the plain loops (docs/architecture.md and docs/performance.md have
  // the times).
  constexpr int in_registers = 16;
  __nv_bfloat16* y = a.out + (static_cast<std::size_t>(b) * a.q_heads + h) * head_dim + d;
  if (chunks <= in_registers) {
    float mv[in_registers], lv[in_registers], ov[in_registers];
#pragma unroll
    for (int c = 0; c < in_registers; ++c)
      if (c < chunks) {
        const float* s = p + c * group * stride;
        mv[c] = s[0];
        lv[c] = s[1];
        ov[c] = s[2 + d];
      }
    *y = merged_output<in_registers>(
        chunks, [&](int c) { return mv[c]; }, [&](int c) { return lv[c]; },
        [&](int c) { return ov[c]; });
    return;
  }
  // More chunks (configurations with short chunks and long rows): plain loops.
  const int cs = group * stride; // floats from one chunk's state to the next
  *y = merged_output<0>(
      chunks, [&](int c) { return p[c * cs]; }, [&](int c) { return p[c * cs + 1]; },
      [&](int c) { return p[c * cs + 2 + d]; });
}

template <int head_dim, int group, int tile, int stages, int warps, bool fused, bool tc = false>
cudaError_t launch_typed(const attention_call& a, cudaStream_t s, bool programmatic) {
  using L = stage1_layout<head_dim, group, tile, stages, warps>;
  // Merging in stage 1 takes the counters, an even group (attention_merges_in_stage1) and a
  // 16-byte aligned workspace (the chunk states' copies); otherwise stage 2 merges, with the
  // same bits.
  constexpr bool can_merge = group % 2 == 0;
  const bool merge =
      can_merge && a.counters &&
      attention_merges_in_stage1(a.cfg, a.q_heads, a.kv_heads, head_dim, a.max_context) &&
      reinterpret_cast<std::uintptr_t>(a.work) % 16 == 0;
  auto* k1 = merge ? attend_chunks<head_dim, group, tile, stages, warps, fused, can_merge, tc>
                   : attend_chunks<head_dim, group, tile, stages, warps, fused, false, tc>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in; set on every launch (cheap, and
  // allowed while a stream is being captured).
  // A grid of one wave (batch 1: 16 chunks x 8 kv heads) asks for more than half an SM's shared
  // memory, so no SM holds two of its blocks. Launched behind the qkv GEMV (the fused prologue),
  // its blocks are placed as that GEMV's blocks drain, and the first SMs to drain took three
  // each (docs/architecture.md has the step's times with and without one block an SM). The
  // rule depends on the grid alone (132: the H200's SMs as a constant, as the GEMV's sweep grid),
  // never on the device, and the bits do not depend on it. A merging block stages the chunk
  // states in the same memory after its own chunk is done.
  const bool one_wave = a.max_chunks * a.kv_heads * a.rows <= one_wave_blocks;
  std::size_t smem_bytes =
      one_wave && L::bytes < one_block_per_sm_bytes ? one_block_per_sm_bytes : L::bytes;
  if (merge)
    smem_bytes = std::max(
        smem_bytes, attention_merge_bytes(a.cfg, a.q_heads, a.kv_heads, head_dim, a.max_context));
  cudaError_t e = cudaFuncSetAttribute(k1, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem_bytes));
  if (e != cudaSuccess) return e;
  e = pdl::launch(k1, dim3(a.max_chunks, a.kv_heads, a.rows), dim3(L::threads), smem_bytes, s,
                  programmatic, 1u, a);
  if (e != cudaSuccess || merge) return e;
  return pdl::launch(merge_chunks<head_dim, group>, dim3(a.q_heads, a.rows), dim3(head_dim), 0, s,
                     a.cfg.pdl || programmatic, 1u, a);
}

template <int head_dim, int group, int tile, bool fused>
cudaError_t launch_stages(const attention_call& a, cudaStream_t s, bool programmatic) {
  switch (a.cfg.stages) {
  case 2:
    return launch_typed<head_dim, group, tile, 2, 4, fused>(a, s, programmatic);
  case 3:
    return launch_typed<head_dim, group, tile, 3, 4, fused>(a, s, programmatic);
  case 4:
    return launch_typed<head_dim, group, tile, 4, 4, fused>(a, s, programmatic);
  default:
    return cudaErrorInvalidValue;
  }
}

// 8 warps: 64-token tiles and 2 stages only (attention_config_supported), one instantiation a
// (head_dim, group, fused) and merge.
template <int head_dim, int group, bool fused>
cudaError_t launch_tile(const attention_call& a, cudaStream_t s, bool programmatic) {
  // The tensor cores: 64-token tiles, 4 warps, 2 or 3 stages (attention_config_supported).
  if (a.cfg.tensor_cores) {
    if (a.cfg.tile != 64 || a.cfg.warps != 4) return cudaErrorInvalidValue;
    return a.cfg.stages == 2
               ? launch_typed<head_dim, group, 64, 2, 4, fused, true>(a, s, programmatic)
           : a.cfg.stages == 3
               ? launch_typed<head_dim, group, 64, 3, 4, fused, true>(a, s, programmatic)
               : cudaErrorInvalidValue;
  }
  if (a.cfg.warps == 8)
    return a.cfg.tile == 64 && a.cfg.stages == 2
               ? launch_typed<head_dim, group, 64, 2, 8, fused>(a, s, programmatic)
               : cudaErrorInvalidValue;
  return a.cfg.tile == 32 ? launch_stages<head_dim, group, 32, fused>(a, s, programmatic)
                          : launch_stages<head_dim, group, 64, fused>(a, s, programmatic);
}

template <int head_dim, bool fused>
cudaError_t launch_group(const attention_call& a, cudaStream_t s, bool programmatic) {
  switch (a.q_heads / a.kv_heads) {
  case 1:
    return launch_tile<head_dim, 1, fused>(a, s, programmatic);
  case 2:
    return launch_tile<head_dim, 2, fused>(a, s, programmatic);
  case 4:
    return launch_tile<head_dim, 4, fused>(a, s, programmatic);
  case 8:
    return launch_tile<head_dim, 8, fused>(a, s, programmatic);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

std::size_t attention_workspace_bytes(const attention_config& c, int rows, int q_heads,
                                      int kv_heads, int head_dim, int max_context) {
  if (!attention_config_supported(c) || rows < 1 || kv_heads < 1 || q_heads % kv_heads ||
      max_context < 1 || head_dim < 1)
    return 0;
  return static_cast<std::size_t>(rows) * q_heads * attention_max_chunks(c, max_context) *
         (head_dim + 2) * sizeof(float);
}

std::size_t attention_workspace_bytes(int rows, int q_heads, int kv_heads, int head_dim,
                                      int max_context) {
  // The engine's graphs (one per batch size 1..rows) share one workspace.
  std::size_t most = 0;
  for (int r = 1; r <= rows; ++r)
    most = std::max(most, attention_workspace_bytes(pick_attention_config(r), r, q_heads, kv_heads,
                                                    head_dim, max_context));
  return most;
}

namespace {

// The checks and the call both entry points share; a.q_w etc. are the caller's.
cudaError_t make_call(attention_call& a, const attention_config& c, const attention_args& x) {
  if (!attention_config_supported(c) || x.rows < 1 || x.kv_heads < 1 || x.q_heads < x.kv_heads ||
      x.q_heads % x.kv_heads || x.max_context < 1 || x.q_row_stride % 8 ||
      reinterpret_cast<std::uintptr_t>(x.q) % 16 ||
      reinterpret_cast<std::uintptr_t>(x.k_cache) % 16 ||
      reinterpret_cast<std::uintptr_t>(x.v_cache) % 16 || !x.q || !x.k_cache || !x.v_cache ||
      !x.slots || !x.lengths || !x.out || !x.workspace || x.kv_heads > 65535 || x.rows > 65535 ||
      x.q_heads > 65535 || (x.head_dim != 64 && x.head_dim != 128))
    return cudaErrorInvalidValue;
  a.q = x.q;
  a.kc = x.k_cache;
  a.vc = x.v_cache;
  a.q_row_stride = x.q_row_stride;
  a.slots = x.slots;
  a.lengths = x.lengths;
  a.capacities = x.capacities;
  a.out = x.out;
  a.work = static_cast<float*>(x.workspace);
  a.counters = x.counters;
  a.rows = x.rows;
  a.q_heads = x.q_heads;
  a.kv_heads = x.kv_heads;
  a.max_context = x.max_context;
  a.max_chunks = attention_max_chunks(c, x.max_context);
  a.scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(x.head_dim)) * log2e);
  a.cfg = c;
  return cudaSuccess;
}

} // namespace

cudaError_t launch_attention_with(const attention_config& c, const attention_args& x,
                                  cudaStream_t s, bool programmatic) {
  attention_call a{};
  if (const cudaError_t e = make_call(a, c, x); e != cudaSuccess) return e;
  return x.head_dim == 64 ? launch_group<64, false>(a, s, programmatic)
                          : launch_group<128, false>(a, s, programmatic);
}

cudaError_t launch_attention_fused_with(const attention_config& c, const attention_args& x,
                                        const attention_prologue& p, cudaStream_t s,
                                        bool programmatic) {
  if (!p.q_weight || !p.k_weight || !(p.theta > 1) ||
      x.q_row_stride < (x.q_heads + 2 * x.kv_heads) * x.head_dim)
    return cudaErrorInvalidValue;
  attention_call a{};
  if (const cudaError_t e = make_call(a, c, x); e != cudaSuccess) return e;
  a.q_w = p.q_weight;
  a.k_w = p.k_weight;
  a.eps = p.eps;
  a.log_theta = std::log(p.theta);
  a.kc_out = x.k_cache;
  a.vc_out = x.v_cache;
  return x.head_dim == 64 ? launch_group<64, true>(a, s, programmatic)
                          : launch_group<128, true>(a, s, programmatic);
}

cudaError_t launch_attention_fused(const attention_args& a, const attention_prologue& p,
                                   cudaStream_t s, bool programmatic) {
  return launch_attention_fused_with(pick_attention_config(a.rows), a, p, s, programmatic);
}

cudaError_t launch_attention(const attention_args& a, cudaStream_t s, bool programmatic) {
  return launch_attention_with(pick_attention_config(a.rows), a, s, programmatic);
}

} // namespace kg::decode
