// Causal prefill attention (attention_prefill.h has the contract): FlashAttention-2 on raw
// mma.sync m16n8k16 bf16 tensor-core instructions, every intermediate in registers.
//
// Grid (q_heads, ceil(n / 64)), 8 warps. A block owns 64 query rows (tokens t0 .. t0 + 63) of
// one q head; its 8 warps are two teams of 4, each warp of a team owning 16 of the rows. Team 0
// takes key tiles 0, 2, 4, ..., team 1 tiles 1, 3, 5, ... (64 keys a tile) of the block's causal
// range [0, p0 + last row]; at the end team 1 hands its (max, sum, O) to team 0 through shared
// memory and team 0 merges, normalizes and writes. Per key tile a warp computes
//   S = Q K^T (Q's A fragments held in registers for the whole block, K's B fragments by
//   ldmatrix), the online softmax in registers (row max and sum over the quad of lanes that share
//   a row, two shuffles), P = exp2(S * log2(e)/sqrt(D) - m) converted from the C layout straight
//   into A fragments (the C fragment of two n8 tiles is the A fragment of one k16 step), and
//   O += P V (V's B fragments by ldmatrix.trans from the row-major tile).
//
// Why this shape:
//  - 64 rows a block: each K/V tile staged in shared memory feeds 64 rows, so the L2 -> SM bytes
//    are q_heads * n / 64 * context * head_dim * 4 per layer (1 GB for a 512-token chunk at 8192
//    tokens, Qwen3-4B), about what the tensor cores' time is; 16 rows a warp keep O (64 floats at
//    head_dim 128), S (32) and Q (32 registers) in registers without spilling.
//  - One q head a block, not the `group` q heads that share a kv head packed into the 64 rows:
//    at a fixed 64 rows a block the K/V bytes per MMA are the same either way (a K/V tile feeds
//    64 rows), and the group's blocks are adjacent in the grid, so they read the same K/V
//    through L2 at about the same time. One head keeps the q load and the causal bounds plain.
//  - Two teams splitting the keys instead of one team of 4 warps: a 256-token chunk of 32 heads
//    is only 128 blocks; with 4 warps a block those would leave one warp per SM sub-partition
//    and nothing to hide the MMA and ldmatrix latencies. Two teams give 8 warps an SM with the
//    same 64-row tiles (no more L2 traffic); the merge costs one pass over O at the end.
//  - Shared-memory rows are swizzled (16-byte chunk index XOR the row's low 3 bits): the 8 rows
//    an ldmatrix reads at one chunk land on 8 different bank groups.
//  - K/V tiles stream in with cp.async (16 bytes a thread), double-buffered per team: the next
//    tile loads while the current one is used. Keys at or past the block's last row (p0 + t0 +
//    rows) are never read: their shared rows are zero-filled by cp.async's src-size 0, so cache
//    garbage past the chunk (NaN, Inf) cannot reach the output through 0 * NaN; masked scores are
//    -inf and give p = 0 exactly. Key tiles wholly above the block's diagonal are never loaded.
//  - Rows past n (the chunk's last q tile) load zeros for q, attend like row n - 1 and are never
//    written.
//  - Heaviest blocks first: blockIdx.y counts q tiles from the chunk's end, whose causal ranges
//    are the longest, so the last wave holds the short ones.
// Every order of summation is fixed by (p0, n) and the shape: the same inputs give the same bits.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/decode/attention_prefill.h"
#include "kernels/decode/cp_async.cuh"
#include "kernels/decode/mma_sync.cuh"

namespace kg::decode {
namespace {

constexpr int rows_per_warp = 16; // one m16 MMA tile of query rows
constexpr int team_warps = 4;
constexpr int teams = 2;
constexpr int team_threads = team_warps * 32;
constexpr int threads = teams * team_threads;
constexpr int block_rows = team_warps * rows_per_warp; // 64 query rows a block
constexpr int key_tile = 64;                           // keys per K/V tile
constexpr double log2e = 1.4426950408889634;           // scores in log2 units: exp2f

// Everything the kernel needs, by value.
struct prefill_call {
  const __nv_bfloat16* q;
  const __nv_bfloat16 *k, *v; // kv head 0, position 0 of the sequence's block
  __nv_bfloat16* out;
  std::int64_t q_row_stride;
  std::size_t kv_head_stride; // elements between kv heads: kv_capacity * head_dim
  int p0, n, q_heads, group;
  float scale_log2; // log2(e) / sqrt(head_dim)
};

// Dynamic shared memory (bytes): the Q tile (reused at the end to stage the output), then each
// team's ring of two stages, a stage being a K tile then a V tile. Team 1's ring becomes the
// merge buffer once its last tile is used.
template <int head_dim>
struct prefill_layout {
  static constexpr int chunks = head_dim / 8; // 16-byte chunks per row
  static constexpr int q_bytes = block_rows * head_dim * 2;
  static constexpr int tile_elems = key_tile * head_dim;
  static constexpr int stage_elems = 2 * tile_elems;
  static constexpr int team_bytes = 2 * stage_elems * 2;
  // Per thread of team 1: O's C fragments, then m[2], l[2].
  static constexpr int merge_floats = head_dim / 2 + 4;
  static constexpr int bytes = q_bytes + teams * team_bytes;
  static_assert(team_threads * merge_floats * 4 <= team_bytes, "merge buffer exceeds the ring");
  static_assert((block_rows * chunks) % threads == 0 && (key_tile * chunks) % team_threads == 0);
};

// Element offset of 16-byte chunk c of row r in a [rows][head_dim] bf16 tile, swizzled: the chunk
// index XOR the row's low 3 bits, so 8 consecutive rows at one logical chunk hit 8 bank groups.
template <int head_dim>
__device__ __forceinline__ int swizzled(int r, int c) {
  return r * head_dim + ((c ^ (r & 7)) << 3);
}

// A team's own barrier (ids 1 and 2; 0 is __syncthreads): the teams walk different tiles and
// never wait for each other inside the loop. Immediate ids, so ptxas reserves 3 barriers, not 16.
__device__ __forceinline__ void team_sync(int team) {
  if (team == 0)
    asm volatile("bar.sync 1, %0;\n" ::"n"(team_threads) : "memory");
  else
    asm volatile("bar.sync 2, %0;\n" ::"n"(team_threads) : "memory");
}

// The quad of lanes holding one row of a C fragment: lanes 4i .. 4i + 3.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The block's 64 q rows of head h (all 256 threads); rows past n are zeros.
template <int head_dim>
__device__ __forceinline__ void load_q_tile(__nv_bfloat16* qs, const prefill_call& a, int h, int t0,
                                            int rows, int tid) {
  constexpr int chunks = prefill_layout<head_dim>::chunks;
#pragma unroll
  for (int u = 0; u < block_rows * chunks / threads; ++u) {
    const int i = tid + u * threads, r = i / chunks, c = i % chunks;
    const bool ok = r < rows;
    const __nv_bfloat16* src =
        ok ? a.q + (t0 + r) * a.q_row_stride + static_cast<std::int64_t>(h) * head_dim + c * 8
           : a.q;
    cp_async16(qs + swizzled<head_dim>(r, c), src, ok);
  }
}

// Key tile [key0, key0 + 64) of K and V into one stage (a team's 128 threads). Keys at or past
// kv_end are zero-filled and not read.
template <int head_dim>
__device__ __forceinline__ void load_kv_tile(__nv_bfloat16* stage, const __nv_bfloat16* kg,
                                             const __nv_bfloat16* vg, int key0, int kv_end,
                                             int ttid) {
  using L = prefill_layout<head_dim>;
#pragma unroll
  for (int u = 0; u < key_tile * L::chunks / team_threads; ++u) {
    const int i = ttid + u * team_threads, r = i / L::chunks, c = i % L::chunks;
    const bool ok = key0 + r < kv_end;
    const std::size_t off = ok ? static_cast<std::size_t>(key0 + r) * head_dim + c * 8 : 0;
    const int at = swizzled<head_dim>(r, c);
    cp_async16(stage + at, kg + off, ok);
    cp_async16(stage + L::tile_elems + at, vg + off, ok);
  }
}

// One warp's running state: O's C fragments (n8 tiles of head dims), the running maximum (log2
// units) and the lane's partial running sum of its two rows (lane / 4 and lane / 4 + 8).
template <int head_dim>
struct warp_state {
  float o[head_dim / 8][4];
  float m[2], l[2];
};

// Q's A fragments for the warp's 16 rows, every k16 step of head_dim: x4 matrices (rows 0-7 |
// 8-15) x (chunk 2k | 2k + 1) are a0a1, a2a3, a4a5, a6a7.
template <int head_dim>
__device__ __forceinline__ void load_q_fragments(unsigned qs_addr, int warp_row0, int lane,
                                                 unsigned (&qf)[head_dim / 16][4]) {
  const int r = warp_row0 + (lane & 15);
#pragma unroll
  for (int kk = 0; kk < head_dim / 16; ++kk)
    ldmatrix_x4(qs_addr + swizzled<head_dim>(r, 2 * kk + (lane >> 4)) * 2, qf[kk]);
}

// S = Q K^T for 64 keys: s[nt] is the C fragment of keys 8 nt .. 8 nt + 7. One x4 ldmatrix gives
// the B fragments of two n8 tiles for one k16 step (matrices: keys 0-7 / 8-15 of the pair x
// chunks 2k / 2k + 1).
template <int head_dim>
__device__ __forceinline__ void tile_scores(unsigned ks_addr,
                                            const unsigned (&qf)[head_dim / 16][4], int lane,
                                            float (&s)[key_tile / 8][4]) {
#pragma unroll
  for (int nt = 0; nt < key_tile / 8; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      s[nt][x] = 0.0f;
  const int key_in = (lane & 7) + ((lane >> 4) << 3), half = (lane >> 3) & 1;
#pragma unroll
  for (int kk = 0; kk < head_dim / 16; ++kk)
#pragma unroll
    for (int np = 0; np < key_tile / 16; ++np) {
      unsigned b[4];
      ldmatrix_x4(ks_addr + swizzled<head_dim>(np * 16 + key_in, 2 * kk + half) * 2, b);
      mma_bf16(s[2 * np], qf[kk], b[0], b[1]);
      mma_bf16(s[2 * np + 1], qf[kk], b[2], b[3]);
    }
}

// Causal mask: key key0 + 8 nt + 2 (lane % 4) + (x & 1) is visible to the row at pos[x / 2] only
// when it is not after it.
__device__ __forceinline__ void mask_scores(float (&s)[key_tile / 8][4], int key0,
                                            const int (&pos)[2], int lane) {
#pragma unroll
  for (int nt = 0; nt < key_tile / 8; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      if (key0 + nt * 8 + (lane & 3) * 2 + (x & 1) > pos[x >> 1]) s[nt][x] = -INFINITY;
}

// The online softmax step: new running maxima, O and l rescaled, s replaced by
// p = exp2(s * scale_log2 - m). A row with every score so far masked keeps m = -inf and p = 0
// (subtracting 0 instead of -inf avoids inf - inf).
template <int head_dim>
__device__ __forceinline__ void softmax_update(float (&s)[key_tile / 8][4], float scale_log2,
                                               warp_state<head_dim>& w) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < key_tile / 8; ++nt) {
    mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
  }
  float base[2], alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float mn = fmaxf(w.m[i], quad_max(mx[i]) * scale_log2);
    base[i] = mn == -INFINITY ? 0.0f : mn;
    alpha[i] = exp2f(w.m[i] - base[i]); // 0 on a row's first visible tile (m = -inf)
    w.m[i] = mn;
  }
#pragma unroll
  for (int nt = 0; nt < key_tile / 8; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      s[nt][x] = exp2f(fmaf(s[nt][x], scale_log2, -base[x >> 1]));
      sum[x >> 1] += s[nt][x];
    }
#pragma unroll
  for (int i = 0; i < 2; ++i)
    w.l[i] = fmaf(w.l[i], alpha[i], sum[i]); // the lane's partial: the quad adds up at the end
#pragma unroll
  for (int dt = 0; dt < head_dim / 8; ++dt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      w.o[dt][x] *= alpha[x >> 1];
}

// O += P V for 64 keys. P's A fragment for keys 16 kk .. 16 kk + 15 is the C fragments of n8
// tiles 2 kk and 2 kk + 1 rounded to bf16 (a0a1 = s[2kk][0..1], a2a3 = s[2kk][2..3], a4a5 =
// s[2kk+1][0..1], a6a7 = s[2kk+1][2..3]). One x4.trans ldmatrix gives the B fragments of two n8
// tiles of head dims (matrices: keys 0-7 / 8-15 x chunks 2d / 2d + 1).
template <int head_dim>
__device__ __forceinline__ void tile_pv(unsigned vs_addr, const float (&p)[key_tile / 8][4],
                                        int lane, warp_state<head_dim>& w) {
  const int key_in = lane & 15, half = lane >> 4;
#pragma unroll
  for (int kk = 0; kk < key_tile / 16; ++kk) {
    const unsigned a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]),
                           pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                           pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < head_dim / 16; ++dp) {
      unsigned b[4];
      ldmatrix_x4_trans(vs_addr + swizzled<head_dim>(kk * 16 + key_in, 2 * dp + half) * 2, b);
      mma_bf16(w.o[2 * dp], a, b[0], b[1]);
      mma_bf16(w.o[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// Team 1's state, in fragment order (thread (warp, lane) writes what the same warp index and lane
// of team 0 reads: no conflicts, no reshuffle).
template <int head_dim>
__device__ __forceinline__ void store_state(float* buf, const warp_state<head_dim>& w, int tw,
                                            int lane) {
  float* p = buf + tw * prefill_layout<head_dim>::merge_floats * 32 + lane;
#pragma unroll
  for (int dt = 0; dt < head_dim / 8; ++dt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      p[(dt * 4 + x) * 32] = w.o[dt][x];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    p[(head_dim / 2 + i) * 32] = w.m[i];
    p[(head_dim / 2 + 2 + i) * 32] = w.l[i];
  }
}

// Team 0 folds team 1's state into its own (both on the same scale afterwards) and turns l into
// the row's total. Team 0 always has key 0, so its m is finite; team 1's may be -inf (no tile, or
// every key masked), giving it weight 0.
template <int head_dim>
__device__ __forceinline__ void merge_state(const float* buf, warp_state<head_dim>& w, int tw,
                                            int lane) {
  const float* p = buf + tw * prefill_layout<head_dim>::merge_floats * 32 + lane;
  float f0[2], f1[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float m1 = p[(head_dim / 2 + i) * 32], l1 = p[(head_dim / 2 + 2 + i) * 32];
    const float mn = fmaxf(w.m[i], m1);
    f0[i] = exp2f(w.m[i] - mn);
    f1[i] = exp2f(m1 - mn);
    w.l[i] = quad_sum(w.l[i] * f0[i] + l1 * f1[i]);
  }
#pragma unroll
  for (int dt = 0; dt < head_dim / 8; ++dt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      w.o[dt][x] = fmaf(w.o[dt][x], f0[x >> 1], p[(dt * 4 + x) * 32] * f1[x >> 1]);
}

// out = O / l, one bf16 rounding, staged through the warp's own 16 rows of the Q tile so the
// global stores are 16 bytes wide; rows past n are not written.
template <int head_dim>
__device__ __forceinline__ void write_rows(__nv_bfloat16* qs, const warp_state<head_dim>& w,
                                           const prefill_call& a, int h, int t0, int warp_row0,
                                           int lane) {
  constexpr int chunks = prefill_layout<head_dim>::chunks;
  const float inv[2] = {1.0f / w.l[0], 1.0f / w.l[1]};
#pragma unroll
  for (int dt = 0; dt < head_dim / 8; ++dt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = warp_row0 + (lane >> 2) + 8 * i;
      *reinterpret_cast<__nv_bfloat162*>(qs + swizzled<head_dim>(r, dt) + (lane & 3) * 2) =
          __floats2bfloat162_rn(w.o[dt][2 * i] * inv[i], w.o[dt][2 * i + 1] * inv[i]);
    }
  __syncwarp();
  const std::int64_t row_elems = static_cast<std::int64_t>(a.q_heads) * head_dim;
#pragma unroll
  for (int u = 0; u < rows_per_warp * chunks / 32; ++u) {
    const int i = lane + 32 * u, r = warp_row0 + i / chunks, c = i % chunks, t = t0 + r;
    if (t < a.n)
      *reinterpret_cast<uint4*>(a.out + t * row_elems + static_cast<std::int64_t>(h) * head_dim +
                                c * 8) =
          *reinterpret_cast<const uint4*>(qs + swizzled<head_dim>(r, c));
  }
}

template <int head_dim>
__global__ void __launch_bounds__(threads, 1) prefill_attention_kernel(const prefill_call a) {
  using L = prefill_layout<head_dim>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int h = blockIdx.x;
  const int t0 = (gridDim.y - 1 - blockIdx.y) * block_rows; // the chunk's last q tiles first
  const int rows = min(block_rows, a.n - t0);
  const int kv_end = a.p0 + t0 + rows; // keys [0, kv_end): the block's causal range
  const int tiles = (kv_end + key_tile - 1) / key_tile;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int team = warp / team_warps, tw = warp % team_warps, ttid = tid % team_threads;
  const int warp_row0 = tw * rows_per_warp;
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem);
  auto* ring = reinterpret_cast<__nv_bfloat16*>(smem + L::q_bytes + team * L::team_bytes);
  const unsigned qs_addr = shared_address(qs);
  const unsigned ring_addr = shared_address(ring);
  const std::size_t head_off = static_cast<std::size_t>(h / a.group) * a.kv_head_stride;
  const __nv_bfloat16* kg = a.k + head_off;
  const __nv_bfloat16* vg = a.v + head_off;
  // The team's i-th tile is key tile team + teams * i.
  const int my_tiles = tiles > team ? (tiles - team + teams - 1) / teams : 0;

  load_q_tile<head_dim>(qs, a, h, t0, rows, tid);
  if (my_tiles > 0) load_kv_tile<head_dim>(ring, kg, vg, team * key_tile, kv_end, ttid);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads(); // Q and both teams' first tiles are in

  unsigned qf[head_dim / 16][4];
  load_q_fragments<head_dim>(qs_addr, warp_row0, lane, qf);
  warp_state<head_dim> w;
#pragma unroll
  for (int dt = 0; dt < head_dim / 8; ++dt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      w.o[dt][x] = 0.0f;
  // Positions of the lane's two rows; rows past n act as row n - 1 (never written).
  const int pos[2] = {a.p0 + min(t0 + warp_row0 + (lane >> 2), a.n - 1),
                      a.p0 + min(t0 + warp_row0 + (lane >> 2) + 8, a.n - 1)};
  const int warp_min_pos = a.p0 + min(t0 + warp_row0, a.n - 1);
  for (int i = 0; i < 2; ++i) {
    w.m[i] = -INFINITY;
    w.l[i] = 0.0f;
  }

  for (int i = 0; i < my_tiles; ++i) {
    if (i > 0) {
      cp_async_wait<0>();
      team_sync(team); // tile i visible to the team, and every warp is done with tile i - 1
    }
    if (i + 1 < my_tiles) { // into the stage tile i - 1 used
      load_kv_tile<head_dim>(ring + ((i + 1) & 1) * L::stage_elems, kg, vg,
                             (team + teams * (i + 1)) * key_tile, kv_end, ttid);
      cp_async_commit();
    }
    const int key0 = (team + teams * i) * key_tile;
    const unsigned ks_addr = ring_addr + (i & 1) * L::stage_elems * 2;
    float s[key_tile / 8][4];
    tile_scores<head_dim>(ks_addr, qf, lane, s);
    if (key0 + key_tile - 1 > warp_min_pos) mask_scores(s, key0, pos, lane); // the diagonal
    softmax_update<head_dim>(s, a.scale_log2, w);
    tile_pv<head_dim>(ks_addr + L::tile_elems * 2, s, lane, w);
  }

  // Team 1's ring holds its state once every warp is done with its tiles (team 0 has to wait for
  // team 1 at the merge anyway, so a block-wide barrier costs nothing over a team barrier).
  float* merge_buf = reinterpret_cast<float*>(smem + L::q_bytes + L::team_bytes);
  __syncthreads();
  if (team == 1) store_state<head_dim>(merge_buf, w, tw, lane);
  __syncthreads(); // team 1's state is in
  if (team == 0) {
    merge_state<head_dim>(merge_buf, w, tw, lane);
    write_rows<head_dim>(qs, w, a, h, t0, warp_row0, lane);
  }
}

template <int head_dim>
cudaError_t launch_typed(const prefill_call& c, int q_tiles, cudaStream_t s) {
  constexpr int bytes = prefill_layout<head_dim>::bytes;
  auto* k = prefill_attention_kernel<head_dim>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in. Set on every launch (a cheap
  // host-side call, allowed during stream capture, and right on whichever device is current).
  if (const cudaError_t e =
          cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess)
    return e;
  k<<<dim3(c.q_heads, q_tiles), threads, bytes, s>>>(c);
  return cudaGetLastError();
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

} // namespace

cudaError_t launch_prefill_attention(const prefill_attention_args& x, cudaStream_t s) {
  const std::int64_t q_tiles = (static_cast<std::int64_t>(x.n) + block_rows - 1) / block_rows;
  if ((x.head_dim != 64 && x.head_dim != 128) || x.kv_heads < 1 || x.q_heads < x.kv_heads ||
      x.q_heads % x.kv_heads || x.n < 1 || x.p0 < 0 || x.kv_start < 0 ||
      static_cast<std::int64_t>(x.p0) + x.n > x.kv_capacity || q_tiles > 65535 ||
      x.q_row_stride % 8 || x.q_row_stride < static_cast<std::int64_t>(x.q_heads) * x.head_dim ||
      !x.q || !x.k_cache || !x.v_cache || !x.out || !aligned16(x.q) || !aligned16(x.k_cache) ||
      !aligned16(x.v_cache) || !aligned16(x.out))
    return cudaErrorInvalidValue;
  prefill_call c{};
  const std::size_t block =
      static_cast<std::size_t>(x.kv_start) * x.kv_heads * static_cast<std::size_t>(x.head_dim);
  c.q = x.q;
  c.k = x.k_cache + block;
  c.v = x.v_cache + block;
  c.out = x.out;
  c.q_row_stride = x.q_row_stride;
  c.kv_head_stride = static_cast<std::size_t>(x.kv_capacity) * x.head_dim;
  c.p0 = x.p0;
  c.n = x.n;
  c.q_heads = x.q_heads;
  c.group = x.q_heads / x.kv_heads;
  c.scale_log2 = static_cast<float>(log2e / std::sqrt(static_cast<double>(x.head_dim)));
  return x.head_dim == 64 ? launch_typed<64>(c, static_cast<int>(q_tiles), s)
                          : launch_typed<128>(c, static_cast<int>(q_tiles), s);
}

} // namespace kg::decode
