// The simt GEMV kernel behind launch_gemv_bf16 (kernels/decode/gemv_bf16.h), included by the
// three gemv_bf16_rpw*.cu files, and the pieces the other families share with it (the prologue,
// loads, unpacking, reductions and split-K finishes).
//
// A block of WPB warps owns a tile of WPB * RPW consecutive rows and one of the `split` K slices
// (block index = tile * split + slice, so a tile's slices are dispatched together and its last
// slice does not wait long for the others). A warp owns RPW rows: per step each lane loads UNROLL
// 16-byte chunks of each of its rows (RPW * UNROLL streaming loads in flight, L1 not allocated,
// so the weights do not push x out of L1), then for each batch row one 16-byte chunk of x (an
// ordinary cached load: x is re-read by every warp) that serves all RPW rows. That sharing is
// what keeps batch 8 off the L1 bandwidth limit: with RPW = 1 a 16-byte weight load costs 8 x
// loads, with RPW = 4 it costs 2.
//
// Every lane sums its chunks in ascending k, the warp reduces with a fixed xor butterfly, and the
// K slices are added in slice order by the tile's last block to finish: the bits never depend on
// scheduling.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/decode/decode_math.cuh"
#include "kernels/decode/gemv_bf16_launch.h"
#include "kernels/decode/programmatic_launch.cuh"

namespace kg::gemv_detail {

// Streaming weight load: read once, so do not allocate in L1 (x stays resident there).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// An L2 prefetch of the 16 bytes at p: issued before gemv_prologue, it starts a weight's DRAM
// read while the kernel ahead is still running (the weights never depend on it).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Every family's store of one output: y[i] <- bf16(sum), or with a.add_to_y (the residual add,
// gemv_fusion) bf16(y[i] + bf16(sum)): launch_add_rmsnorm's add of its delta, the same bits.
// output_with takes y[i] loaded earlier (`prior`): a loop that stores a row an iteration loads it
// at the iteration's top, so the load's round trip passes under the row's sums instead of holding
// the storing warp, and the block at its next barrier, after them.
__device__ __forceinline__ __nv_bfloat16 output_with(const gemv_args& a, __nv_bfloat16 prior,
                                                     float sum) {
  const __nv_bfloat16 v = __float2bfloat16(sum);
  if (!a.add_to_y) return v;
  return __float2bfloat16(__fadd_rn(__bfloat162float(prior), __bfloat162float(v)));
}
__device__ __forceinline__ __nv_bfloat16 output_of(const gemv_args& a, std::size_t i, float sum) {
  return output_with(a, a.add_to_y ? a.y[i] : __nv_bfloat16{}, sum);
}
__device__ __forceinline__ void store_y(const gemv_args& a, std::size_t i, float sum) {
  a.y[i] = output_of(a, i, sum);
}

// Outputs b, row .. row + 3 <- sum's four floats, rows at or past n dropped: one 8-byte store
// where n keeps a quad 4-aligned in y (and y is 8-byte aligned), else one store an output.
__device__ __forceinline__ void store_y_quad(const gemv_args& a, int b, int row,
                                             const float4& sum) {
  const std::size_t i = static_cast<std::size_t>(b) * a.n + row;
  if (a.n % 4 == 0 && reinterpret_cast<std::uintptr_t>(a.y) % 8 == 0) {
    if (row >= a.n) return; // (a whole quad: n is a multiple of 4)
    const __nv_bfloat162 lo =
        __halves2bfloat162(output_of(a, i, sum.x), output_of(a, i + 1, sum.y));
    const __nv_bfloat162 hi =
        __halves2bfloat162(output_of(a, i + 2, sum.z), output_of(a, i + 3, sum.w));
    uint2 out;
    out.x = *reinterpret_cast<const unsigned*>(&lo);
    out.y = *reinterpret_cast<const unsigned*>(&hi);
    *reinterpret_cast<uint2*>(a.y + i) = out;
    return;
  }
  const float v[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
  for (int e = 0; e < 4; ++e)
    if (row + e < a.n) store_y(a, i + e, v[e]);
}

// The start of every GEMV kernel (a programmatic launch: programmatic_launch.cuh): nothing is
// read before the kernel ahead has completed; the next kernel (always a small one) may then be
// scheduled, its few blocks waiting behind these.
__device__ __forceinline__ void gemv_prologue() {
  pdl::wait();
  pdl::allow_dependents();
}

// Distributed shared memory of the block's cluster (cluster split K).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}

// The address of `local` (this block's shared memory) in the cluster's block of rank `rank`.
__device__ __forceinline__ unsigned cluster_address(const float* local, unsigned rank) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}

// The float at `local` in the cluster's block of rank `rank`.
__device__ __forceinline__ float load_cluster(const float* local, unsigned rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];"
               : "=f"(v)
               : "r"(cluster_address(local, rank))
               : "memory");
  return v;
}

// The 16 bytes at `local` (16-byte aligned) in the cluster's block of rank `rank`.
__device__ __forceinline__ float4 load_cluster4(const float* local, unsigned rank) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_address(local, rank))
               : "memory");
  return v;
}

// Cluster split K: `part` (shared, [COLS][TILE_ROWS]: batch row b, tile row r at b * TILE_ROWS +
// r) holds this block's slice sums for its tile, and the tile's split blocks are one cluster of
// a.split blocks, rank = slice (blockIdx.x % split). After the cluster barrier (release/acquire:
// every block's part is visible), block s finishes the outputs i with i % split == s, adding the
// slices in slice order -- finish_split_k's order and so its bits. The second barrier keeps each
// block's shared memory alive until the others have read it. Every thread must call it.
template <int TILE_ROWS, int COLS>
__device__ __forceinline__ void finish_cluster(const gemv_args& a, const float* part, int tile,
                                               int slice) {
  cluster_sync();
  for (int j = static_cast<int>(threadIdx.x);; j += static_cast<int>(blockDim.x)) {
    const int i = j * a.split + slice;
    if (i >= TILE_ROWS * COLS) break;
    const int b = i / TILE_ROWS, row = tile * TILE_ROWS + i % TILE_ROWS;
    if (b >= a.nb || row >= a.n) continue;
    float sum = 0.0f;
    for (int s = 0; s < a.split; ++s)
      sum += load_cluster(part + i, static_cast<unsigned>(s));
    store_y(a, static_cast<std::size_t>(b) * a.n + row, sum);
  }
  cluster_sync();
}

// One m16n8k16 tensor-core mma, bf16 in, float32 accumulate: c += A B, A the 16 x 16 fragment
// (a0..a3), B the 16 x 8 one (b0, b1) in the PTX fragment layouts.
__device__ __forceinline__ void mma_bf16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// bf16 -> f32 is exact: the bf16 bits are the top half of the float (decode_math.cuh).
using kg::decode::math::unpack8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The folded RMSNorm (a.norm_w, gemv_fusion): x_b's chunk `xv` at chunk c -> bf16(x inv_b w)
// elementwise, scale_round as launch_add_rmsnorm rounds it.
__device__ __forceinline__ void norm_chunk(float (&xf)[8], float inv, const uint4& gv) {
  float g[8];
  unpack8(gv, g);
#pragma unroll
  for (int e = 0; e < 8; ++e)
    xf[e] = __bfloat162float(
        kg::decode::math::scale_round(xf[e], inv, __float2bfloat16(g[e]))); // g is bf16: exact
}

// acc[r][b] += w_r . x_b over one 16-byte chunk c (the same chunk of every row and batch row).
// norm (a.norm_w as chunks, or null): x is normalised on the fly, inv[b] (shared) its rows' 1 /
// RMS.
template <int BG, int RPW>
__device__ __forceinline__ void fma_chunk(const uint4 (&wv)[RPW], const uint4* __restrict__ x,
                                          int k8, int c, int nb, float (&acc)[RPW][BG],
                                          const uint4* __restrict__ norm, const float* inv) {
  float wf[RPW][8];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
    unpack8(wv[r], wf[r]);
  const uint4 gv = norm ? __ldg(norm + c) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int b = 0; b < BG; ++b) {
    if (b >= nb) break; // a partial last batch group: nb is uniform over the grid
    float xf[8];
    unpack8(__ldg(x + static_cast<std::size_t>(b) * k8 + c), xf);
    if (norm) norm_chunk(xf, inv[b], gv);
#pragma unroll
    for (int r = 0; r < RPW; ++r)
#pragma unroll
      for (int e = 0; e < 8; ++e)
        acc[r][b] = fmaf(wf[r][e], xf[e], acc[r][b]);
  }
}
template <int BG, int RPW>
__device__ __forceinline__ void fma_chunk(const uint4 (&wv)[RPW], const uint4* __restrict__ x,
                                          int k8, int c, int nb, float (&acc)[RPW][BG]) {
  fma_chunk<BG, RPW>(wv, x, k8, c, nb, acc, nullptr, nullptr);
}

// Split K, after every thread of the block has stored its partials: whether this block is the
// last of the `count` blocks (default a.split) counted on `counter` (a tile's slices). The fence
// makes this block's partials visible device-wide before its arrival is counted, the second one
// orders the counter observation before the last block reads the others' partials. Every thread of
// the block must call it; the last block must then reset the counter (end_split_k).
__device__ __forceinline__ bool last_of_split(const gemv_args& a, int counter, int count) {
  __shared__ bool is_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    is_last = atomicAdd(a.counters + counter, 1u) == static_cast<unsigned>(count - 1);
  __syncthreads();
  if (is_last) __threadfence();
  return is_last;
}
__device__ __forceinline__ bool last_of_split(const gemv_args& a, int counter) {
  return last_of_split(a, counter, a.split);
}

// The last block's part: y of rows [row0, row0 + rows) = the first `count` (default a.split)
// slices' partials summed in slice order (whichever block does it, the sum is the same). A thread
// issues all its loads of a round before adding any: one at a time, the loads' L2 latency made
// this tail most of a split-K launch at batch 64-128 (docs/performance.md).
constexpr int max_split_k = 8; // gemv_config::split_k is 1, 2, 3, 4 or 8

// One output a thread, `outputs` of them a round: any n.
__device__ __forceinline__ void sum_slices_scalar(const gemv_args& a, int row0, int rows,
                                                  int count) {
  constexpr int outputs = 4;
  const int total = rows * a.nb, stride = static_cast<int>(blockDim.x);
  for (int t0 = static_cast<int>(threadIdx.x); t0 < total; t0 += outputs * stride) {
    float v[outputs][max_split_k];
#pragma unroll
    for (int u = 0; u < outputs; ++u) {
      const int t = t0 + u * stride, b = t / rows, row = row0 + t % rows;
      const bool in = t < total && row < a.n;
      const float* p = a.partial + static_cast<long long>(b) * a.n + row;
#pragma unroll
      for (int s = 0; s < max_split_k; ++s) // L2: other SMs wrote these, L1 may be stale
        v[u][s] = in && s < count ? __ldcg(p + s * a.slice_stride) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < outputs; ++u) {
      const int t = t0 + u * stride, b = t / rows, row = row0 + t % rows;
      if (t >= total || row >= a.n) continue;
      float sum = 0.0f;
#pragma unroll
      for (int s = 0; s < max_split_k; ++s)
        if (s < count) sum += v[u][s];
      store_y(a, static_cast<std::size_t>(b) * a.n + row, sum);
    }
  }
}

// Four consecutive rows of one batch row a thread (16-byte loads of each slice), G of them a
// round, slices up to S: the same additions in the same order as the scalar form, a quarter of
// its loads. Needs rows, row0, n and the slice stride multiples of 4 and partial / y aligned to
// 16 / 8 bytes (whole quads: a quad is either all below n or all past it).
template <int G, int S>
__device__ __forceinline__ void sum_slices_quads(const gemv_args& a, int row0, int rows,
                                                 int count) {
  const int quads = rows / 4, total = quads * a.nb, stride = static_cast<int>(blockDim.x);
  const long long slice4 = a.slice_stride / 4;
  for (int t0 = static_cast<int>(threadIdx.x); t0 < total; t0 += G * stride) {
    float4 v[G][S];
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int t = t0 + u * stride, b = t / quads, row = row0 + 4 * (t % quads);
      const bool in = t < total && row < a.n;
      const float4* p =
          reinterpret_cast<const float4*>(a.partial + static_cast<long long>(b) * a.n + row);
#pragma unroll
      for (int s = 0; s < S; ++s) // L2: other SMs wrote these, L1 may be stale
        v[u][s] = in && s < count ? __ldcg(p + s * slice4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int t = t0 + u * stride, b = t / quads, row = row0 + 4 * (t % quads);
      if (t >= total || row >= a.n) continue;
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < S; ++s)
        if (s < count) {
          sum.x += v[u][s].x;
          sum.y += v[u][s].y;
          sum.z += v[u][s].z;
          sum.w += v[u][s].w;
        }
      store_y_quad(a, b, row, sum);
    }
  }
}

__device__ __forceinline__ void sum_slices(const gemv_args& a, int row0, int rows, int count) {
  const bool quads = rows % 4 == 0 && row0 % 4 == 0 && a.n % 4 == 0 && a.slice_stride % 4 == 0 &&
                     reinterpret_cast<std::uintptr_t>(a.partial) % 16 == 0 &&
                     reinterpret_cast<std::uintptr_t>(a.y) % 8 == 0;
  if (!quads)
    sum_slices_scalar(a, row0, rows, count);
  else if (count <= 2)
    sum_slices_quads<4, 2>(a, row0, rows, count);
  else if (count <= 4)
    sum_slices_quads<2, 4>(a, row0, rows, count);
  else
    sum_slices_quads<1, max_split_k>(a, row0, rows, count);
}
__device__ __forceinline__ void sum_slices(const gemv_args& a, int row0, int rows) {
  sum_slices(a, row0, rows, a.split);
}

// Leaves the counter at 0 for the next launch on this workspace.
__device__ __forceinline__ void end_split_k(const gemv_args& a, int counter) {
  if (threadIdx.x == 0) a.counters[counter] = 0;
}

// Split K for a block of one tile: the tile's last block to finish sums its rows.
__device__ __forceinline__ void finish_split_k(const gemv_args& a, int tile, int tile_rows) {
  if (!last_of_split(a, tile)) return;
  sum_slices(a, tile * tile_rows, tile_rows);
  end_split_k(a, tile);
}

// The tensor-core families' arithmetic for one 16-byte chunk pair (mma, packed): va (row g) and
// vb (row g + 8) at chunk `ch`, against x's chunk `ch` of each 8-column batch tile (L1; zero when
// !in), as two m16n8k16 mma's whose k pairs are the chunk's words {0, 1} and {2, 3}.
template <int NT>
__device__ __forceinline__ void mma_chunk_pair(float (&c)[NT][4], const uint4& va, const uint4& vb,
                                               const uint4* const (&xr)[NT], int ch, bool in) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const uint4 xv = in ? __ldg(xr[nt] + ch) : zero;
    mma_bf16(c[nt], va.x, vb.x, va.y, vb.y, xv.x, xv.y);
    mma_bf16(c[nt], va.z, vb.z, va.w, vb.w, xv.z, xv.w);
  }
}

// The tensor-core families' finish (mma, packed): each warp's 16 x 8NT accumulator tile (the
// m16n8k16 layout: c[nt][0..1] row g, batch columns nt * 8 + 2t + {0, 1}; c[nt][2..3] row g + 8)
// summed in warp order through shared memory, to y without split K, else to this slice's
// partials and split K's finish. Every thread of the block must call it.
template <int NT, int WPB>
__device__ __forceinline__ void finish_mma_tile(const gemv_args& a, const float (&c)[NT][4],
                                                int warp, int g, int t, int tile, int slice) {
  constexpr int rows = 16, cols = NT * 8;
  __shared__ float tiles[WPB][rows][cols];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      tiles[warp][e < 2 ? g : g + 8][nt * 8 + 2 * t + (e & 1)] = c[nt][e];
  __syncthreads();
  // Consecutive threads take consecutive rows of one batch column: y is [b][n].
  for (int i = static_cast<int>(threadIdx.x); i < rows * cols; i += WPB * 32) {
    const int r = i % rows, b = i / rows, row = tile * rows + r;
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < WPB; ++v) // warp order: fixed
      sum += tiles[v][r][b];
    if (b >= a.nb || row >= a.n) continue;
    if (a.split == 1)
      store_y(a, static_cast<std::size_t>(b) * a.n + row, sum);
    else
      a.partial[slice * a.slice_stride + static_cast<long long>(b) * a.n + row] = sum;
  }
  if (a.split > 1) finish_split_k(a, tile, rows);
}

// A warp's rows row0 .. row0 + RPW: reduce each accumulator over the lanes (fixed xor butterfly,
// every lane gets the sum) and spread the stores over the lanes; y directly without split K,
// else this slice's partials: to `part` (shared, [BG][tile rows], row0 - tile_row0 the warp's
// first) for cluster split K, else to the workspace.
template <int BG, int RPW>
__device__ __forceinline__ void
store_warp_rows(const gemv_args& a, const float (&acc)[RPW][BG], int row0, int lane, int slice,
                float* part = nullptr, int tile_row0 = 0, int tile_rows = 0) {
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BG; ++b) {
      const float v = warp_sum(acc[r][b]);
      const int row = row0 + r;
      if (lane != (r * BG + b) % 32 || b >= a.nb || row >= a.n) continue;
      if (a.split == 1)
        store_y(a, static_cast<std::size_t>(b) * a.n + row, v);
      else if (part)
        part[b * tile_rows + row - tile_row0] = v;
      else
        a.partial[slice * a.slice_stride + static_cast<long long>(b) * a.n + row] = v;
    }
}

// The gated epilogue (a.gated, RPW 2, split 1): the warp's two rows are gate row `pair` and its
// up row; both sums rounded to bf16 as launch_gemv_bf16 stores them, then the SiLU-gate kernel's
// arithmetic (decode_math.cuh), so the bits are those of the two launches.
template <int BG, int RPW>
__device__ __forceinline__ void store_gated(const gemv_args& a, const float (&acc)[RPW][BG],
                                            int pair, int lane) {
  const int half = a.n / 2;
#pragma unroll
  for (int b = 0; b < BG; ++b) {
    const float g = warp_sum(acc[0][b]), u = warp_sum(acc[RPW - 1][b]);
    if (lane != b % 32 || b >= a.nb || pair >= half) continue;
    a.y[static_cast<std::size_t>(b) * half + pair] = kg::decode::math::silu_gate(
        __bfloat162float(__float2bfloat16(g)), __bfloat162float(__float2bfloat16(u)));
  }
}

template <int BG, int RPW, int UNROLL, int WPB>
__global__ void __launch_bounds__(WPB * 32) gemv_bf16_kernel(const gemv_args a) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int tile = static_cast<int>(blockIdx.x) / a.split;
  const int slice = static_cast<int>(blockIdx.x) % a.split;
  const int row0 = (tile * WPB + warp) * RPW;
  // Gated: the warp's rows are pair and pair + n / 2 (store_gated) instead of row0, row0 + 1.
  const bool gated = RPW == 2 && a.gated;
  const int pair = tile * WPB + warp;
  const bool active = gated ? pair < a.n / 2 : row0 < a.n;
  const int begin = slice * a.slice_len, end = min(a.k8, begin + a.slice_len);
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  const uint4* wrow[RPW];
#pragma unroll
  for (int r = 0; r < RPW; ++r) { // rows past n read row 0 (never stored): no branch in the loop
    const int row = gated ? pair + r * (a.n / 2) : row0 + r;
    wrow[r] =
        reinterpret_cast<const uint4*>(a.w) + static_cast<std::size_t>(row < a.n ? row : 0) * a.k8;
  }
  // The first step's weights head for L2 before the wait: under a programmatic launch this
  // kernel is scheduled while the small kernel ahead runs.
  if (active)
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (begin + lane + 32 * u < end)
#pragma unroll
        for (int r = 0; r < RPW; ++r)
          prefetch_l2(wrow[r] + begin + lane + 32 * u);

  gemv_prologue();

  // The folded RMSNorm (a.norm_w): warp 0 finds each batch row's 1 / RMS for the whole block.
  // (In shared memory, not registers: BG of them would spill the large batch groups.) Every
  // warp's first whole step of weights is loaded before the barrier that publishes them, so that
  // its latency runs under warp 0's reads of x rather than after them; the loop below then
  // starts one step on, and the sums keep their order.
  const uint4* norm = reinterpret_cast<const uint4*>(a.norm_w);
  int c = begin + lane;
  const bool first_ahead = norm && active && c + 32 * (UNROLL - 1) < end;
  uint4 first[UNROLL][RPW];
  if (first_ahead)
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int r = 0; r < RPW; ++r)
        first[u][r] = load_stream(wrow[r] + c + 32 * u);
  __shared__ float inv[BG];
  if (norm) {
    if (warp == 0)
      for (int b = 0; b < a.nb; ++b) {
        const float v = kg::decode::math::row_inv_rms_warp(
            a.x + static_cast<std::size_t>(b) * a.k8 * 8, a.k8 * 8, a.norm_eps);
        if (lane == 0) inv[b] = v;
      }
    __syncthreads();
  }

  float acc[RPW][BG];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BG; ++b)
      acc[r][b] = 0.0f;

  if (active) { // a warp wholly past n (last tile) only joins the split-K handshake
    if (first_ahead) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        fma_chunk<BG, RPW>(first[u], x, a.k8, c + 32 * u, a.nb, acc, norm, inv);
      c += 32 * UNROLL;
    }
    // Whole steps: all UNROLL chunks of this lane inside the slice. Loads first, all in flight.
    for (; c + 32 * (UNROLL - 1) < end; c += 32 * UNROLL) {
      uint4 wv[UNROLL][RPW];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int r = 0; r < RPW; ++r)
          wv[u][r] = load_stream(wrow[r] + c + 32 * u);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        fma_chunk<BG, RPW>(wv[u], x, a.k8, c + 32 * u, a.nb, acc, norm, inv);
    }
    // The slice's tail, one chunk at a time (same ascending order).
    for (; c < end; c += 32) {
      uint4 wv[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r)
        wv[r] = load_stream(wrow[r] + c);
      fma_chunk<BG, RPW>(wv, x, a.k8, c, a.nb, acc, norm, inv);
    }
  }

  if (gated) {
    store_gated<BG, RPW>(a, acc, pair, lane);
    return;
  }
  if (a.cluster) {
    __shared__ float part[BG * WPB * RPW];
    store_warp_rows<BG, RPW>(a, acc, row0, lane, slice, part, tile * WPB * RPW, WPB * RPW);
    finish_cluster<WPB * RPW, BG>(a, part, tile, slice);
    return;
  }
  store_warp_rows<BG, RPW>(a, acc, row0, lane, slice);
  if (a.split > 1) finish_split_k(a, tile, WPB * RPW);
}

template <int BG, int RPW, int UNROLL, int WPB>
cudaError_t launch_one(const gemv_args& a, int blocks, cudaStream_t s) {
  return pdl::launch(gemv_bf16_kernel<BG, RPW, UNROLL, WPB>, dim3(blocks), dim3(WPB * 32), 0, s,
                     a.programmatic, a.cluster ? static_cast<unsigned>(a.split) : 1u, a);
}

template <int BG, int RPW, int UNROLL>
cudaError_t launch_by_wpb(const gemv_args& a, int wpb, int blocks, cudaStream_t s) {
  switch (wpb) {
  case 4:
    return launch_one<BG, RPW, UNROLL, 4>(a, blocks, s);
  case 8:
    return launch_one<BG, RPW, UNROLL, 8>(a, blocks, s);
  case 16:
    return launch_one<BG, RPW, UNROLL, 16>(a, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

// RPW * UNROLL <= 16: more weight loads in flight per lane only costs registers (spills).
template <int BG, int RPW>
cudaError_t launch_by_unroll(const gemv_args& a, int unroll, int wpb, int blocks, cudaStream_t s) {
  switch (unroll) {
  case 2:
    return launch_by_wpb<BG, RPW, 2>(a, wpb, blocks, s);
  case 4:
    return launch_by_wpb<BG, RPW, 4>(a, wpb, blocks, s);
  case 8:
    if constexpr (RPW * 8 <= 16) return launch_by_wpb<BG, RPW, 8>(a, wpb, blocks, s);
    return cudaErrorInvalidValue;
  default:
    return cudaErrorInvalidValue;
  }
}

// Batch groups with RPW * BG <= 32 accumulators per lane.
template <int RowsPerWarp>
cudaError_t launch_gemv_rows(const gemv_args& a, int bg, int unroll, int warps_per_block,
                             int blocks, cudaStream_t s) {
  constexpr int R = RowsPerWarp;
  switch (bg) {
  case 1:
    return launch_by_unroll<1, R>(a, unroll, warps_per_block, blocks, s);
  case 2:
    return launch_by_unroll<2, R>(a, unroll, warps_per_block, blocks, s);
  case 4:
    return launch_by_unroll<4, R>(a, unroll, warps_per_block, blocks, s);
  case 8:
    return launch_by_unroll<8, R>(a, unroll, warps_per_block, blocks, s);
  case 16:
    if constexpr (R * 16 <= 32)
      return launch_by_unroll<16, R>(a, unroll, warps_per_block, blocks, s);
    return cudaErrorInvalidValue;
  case 32:
    if constexpr (R * 32 <= 32)
      return launch_by_unroll<32, R>(a, unroll, warps_per_block, blocks, s);
    return cudaErrorInvalidValue;
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
