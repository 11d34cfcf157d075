// The producer/consumer block of the decode GEMV's wgmma_ws and wgmma_pk families
// (gemv_bf16_wgmma_ws.cu, gemv_bf16_wgmma_pk.cu): the wgmma_tma family's tiles, sums and split-K
// finish, with the block split by role. One producer warpgroup (one of its threads) keeps a ring
// of STAGES stages full, refilling a stage as soon as every consumer warp has released it; the
// consumer warpgroups wait for a stage, run its wgmma's and release it, never meeting at a
// block-wide barrier inside the loop.
//
// Per k tile j of the block's slice, stage s = j % STAGES: full[s] completes its phase when the
// bytes of tile j have landed (the producer arrives with the expected bytes); empty[s] completes
// its phase when each of the 4 x WG consumer warps has arrived after its wgmma's of tile j have
// completed, and the producer waits for that before loading tile j + STAGES there. At batch tile
// 128 a consumer keeps one tile's wgmma's in flight (it releases tile j once it has issued tile
// j + 1's): there the tensor cores' time per stage shows; below it, waiting for each tile's
// wgmma's and releasing its stage at once measured faster (docs/performance.md).
//
// PACKED (wgmma_pk): the weights are the wgmma_tiles copy (pack_gemv_weights), in which each
// (64-row tile, k tile) is 8 KB of consecutive bytes already in the 128-byte swizzle the TMA
// would write, so a stage's weights arrive by plain bulk copies of 8 KB (one per 64 rows of the
// block) and a block streams its tile front to back. Otherwise (wgmma_ws) a TMA tensor copy of
// the block's rows x 64 columns of the row-major weights. Either way the stage's bytes are the
// same, so are the wgmma's and their order: the two families and wgmma give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda.h>

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_stage.cuh"
#include "kernels/decode/gemv_bf16_tma_launch.cuh"
#include "kernels/decode/gemv_bf16_wgmma.cuh"
#include "kernels/decode/mbarrier.cuh"

namespace kg::gemv_detail {

// The wgmma_tiles copy's 8 KB unit of 64-row tile `tile64` at k tile `kt` (k_tiles per row).
__device__ __forceinline__ const void* packed_unit(const gemv_args& a, int tile64, int kt,
                                                   int k_tiles) {
  return reinterpret_cast<const unsigned char*>(a.w) +
         (static_cast<std::size_t>(tile64) * k_tiles + kt) * wgmma_tile_unit_bytes;
}

// The producer's loads of k tile `kt` into stage `st` (weights, then the x rows), completing on
// `bar`; and their L2 prefetch before the programmatic wait.
template <int BM, bool PACKED>
__device__ __forceinline__ void
load_ws_stage(unsigned char* st, const CUtensorMap* w_map, const CUtensorMap* x_map,
              const gemv_args& a, int row0, int kt, int k_tiles, unsigned long long* bar) {
  if constexpr (PACKED) {
#pragma unroll
    for (int i = 0; i < BM / 64; ++i)
      kg::decode::bulk_copy(st + i * wgmma_tile_unit_bytes,
                            packed_unit(a, row0 / 64 + i, kt, k_tiles), wgmma_tile_unit_bytes, bar);
  } else {
    kg::decode::tma_load_2d(st, w_map, kt * tma_tile_elements, row0, bar);
  }
  kg::decode::tma_load_2d(st + BM * row_bytes, x_map, kt * tma_tile_elements, 0, bar);
}
template <int BM, bool PACKED>
__device__ __forceinline__ void prefetch_ws_stage(const CUtensorMap* w_map, const gemv_args& a,
                                                  int row0, int kt, int k_tiles) {
  if constexpr (PACKED) {
#pragma unroll
    for (int i = 0; i < BM / 64; ++i)
      kg::decode::bulk_prefetch_l2(packed_unit(a, row0 / 64 + i, kt, k_tiles),
                                   wgmma_tile_unit_bytes);
  } else {
    kg::decode::tma_prefetch_2d(w_map, kt * tma_tile_elements, row0);
  }
}

constexpr int wgmma_overlap_min_bn = 128; // the batch tile from which tiles overlap

// The cluster finish (gemv_config::cluster): the tile's split blocks are one cluster (rank =
// slice), each stages its slice's sums in its own ring, and each sums a share of the tile's
// outputs over every rank's partials through distributed shared memory, in slice order from 0 --
// the workspace finish's additions in its order, so the same bits -- with no partials through L2,
// no fence, no counter and no last block re-reading every slice (that tail grows with the batch:
// 64 rows x 128 columns are 32 KB a slice).
//
// The partials: batch column b, tile row r at b * stride + r, stride = the block's rows + 4 (the
// pad puts a warp's stores of one accumulator, 8 rows x 4 column pairs, in 32 banks), whole
// 16-byte quads of 4 rows.
template <int BM>
constexpr int cluster_part_stride = BM + 4;
template <int BM, int BN>
constexpr int cluster_part_bytes = BN* cluster_part_stride<BM> * 4;

// Warpgroup `wg`'s accumulators (rows wg MT 64 .. of the block) -> the partials at `part`.
template <int MT, int BN, int BM>
__device__ __forceinline__ void stage_wgmma_part(const float (&c)[MT][BN / 2], float* part, int wg,
                                                 int t) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) {
      const wgmma_position p = wgmma_accumulator_at(t, e);
      part[p.n * cluster_part_stride<BM> + (wg * MT + mt) * 64 + p.m] = c[mt][e];
    }
}

// This block's share of the tile's quads (batch column b, rows 4 j .. 4 j + 3 as quad b BM / 4 +
// j; rank s takes the s-th of split near-equal ranges, so a warp's stores are consecutive rows):
// G quads a thread a round, every slice's 16 bytes of each loaded before any is added.
template <int BM, int G, int S>
__device__ __forceinline__ void sum_cluster_quads(const gemv_args& a, const float* part, int row0,
                                                  int slice) {
  constexpr int col_quads = BM / 4;
  const int total = a.nb * col_quads, per = (total + a.split - 1) / a.split;
  const int first = slice * per, last = min(total, first + per);
  const int stride = static_cast<int>(blockDim.x);
  for (int t0 = first + static_cast<int>(threadIdx.x); t0 < last; t0 += G * stride) {
    float4 v[G][S];
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int t = t0 + u * stride;
      const float* at = part + (t / col_quads) * cluster_part_stride<BM> + 4 * (t % col_quads);
#pragma unroll
      for (int s = 0; s < S; ++s)
        v[u][s] = t < last && s < a.split ? load_cluster4(at, static_cast<unsigned>(s))
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int t = t0 + u * stride;
      if (t >= last) continue;
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < S; ++s)
        if (s < a.split) {
          sum.x += v[u][s].x;
          sum.y += v[u][s].y;
          sum.z += v[u][s].z;
          sum.w += v[u][s].w;
        }
      store_y_quad(a, t / col_quads, row0 + 4 * (t % col_quads), sum);
    }
  }
}

// The cluster finish for the whole block (every thread calls it, after its warpgroup's wgmma's
// are done): the ring becomes this slice's partials, then the cluster sums them.
// The cluster finish, in two parts. A consumer warpgroup, its wgmma's done: once every consumer
// warpgroup's are (a named barrier: they read each other's x rows), the ring becomes the
// partials and it stores its accumulators there. The accumulators stay inside the consumers'
// branch, as in the other finishes (kept live across the block, they spilled the 256-row,
// 128-column tile). Then the whole block (every thread): the cluster sums the partials.
template <int MT, int BN, int WG, int STAGES>
__device__ __forceinline__ void stage_cluster_part(const float (&c)[MT][BN / 2],
                                                   unsigned char* ring, int wg, int t) {
  constexpr int bm = wg_block_rows<MT, WG>;
  static_assert(cluster_part_bytes<bm, BN> <= STAGES * wg_stage_bytes<MT, BN, WG>,
                "the partials live in the ring");
  asm volatile("bar.sync 1, %0;" ::"n"(WG * 128) : "memory"); // the consumers only
  stage_wgmma_part<MT, BN, bm>(c, reinterpret_cast<float*>(ring), wg, t);
}
template <int BM>
__device__ __forceinline__ void finish_wgmma_cluster(const gemv_args& a, unsigned char* ring,
                                                     const ring_slice& r) {
  const float* part = reinterpret_cast<const float*>(ring);
  cluster_sync(); // every rank's partials written and visible (release / acquire)
  if (a.split <= 2)
    sum_cluster_quads<BM, 4, 2>(a, part, r.row0, r.slice);
  else if (a.split <= 4)
    sum_cluster_quads<BM, 2, 4>(a, part, r.row0, r.slice);
  else
    sum_cluster_quads<BM, 1, max_split_k>(a, part, r.row0, r.slice);
  cluster_sync(); // no rank leaves while another may still read its partials
}

// WG consumer warpgroups (threads 0 .. 128 WG - 1, as the wgmma kernel's) and one producer
// warpgroup behind them: 128 (WG + 1) threads, one block an SM by its shared memory.
template <int MT, int BN, int WG, int STAGES, bool PACKED>
__global__ void __launch_bounds__((WG + 1) * 128, 1)
    gemv_wgmma_ws_kernel(const __grid_constant__ CUtensorMap w_map,
                         const __grid_constant__ CUtensorMap x_map, const gemv_args a) {
  constexpr int bm = wg_block_rows<MT, WG>;
  constexpr int stage_size = wg_stage_bytes<MT, BN, WG>;
  constexpr int producer = WG * 128; // the producer warpgroup's first thread
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  unsigned base; // the ring's shared address, for the descriptors
  unsigned char* smem = align_ring(smem_raw, base);
  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, t = tid % 128;
  const ring_slice r = block_slice<bm>(a);
  const int k_tiles = (a.k8 + gemm_tile_chunks - 1) / gemm_tile_chunks;

  if (tid == producer) {
    for (int j = 0; j < STAGES; ++j) {
      kg::decode::mbar_init(&full[j], 1);
      kg::decode::mbar_init(&empty[j], 4 * WG); // one arrival per consumer warp
    }
    kg::decode::mbar_init_fence();
    // The weights never depend on the kernel ahead: the first tiles head for L2 before the
    // programmatic wait (gemv_prologue), as in the other families.
    for (int j = 0; j < STAGES && j < r.count; ++j)
      prefetch_ws_stage<bm, PACKED>(&w_map, a, r.row0, r.kt0 + j, k_tiles);
  }
  __syncthreads();
  gemv_prologue();

  if (wg == WG) { // the producer: one thread issues every tile of the slice, in order
    if (t == 0)
      for (int j = 0; j < r.count; ++j) {
        const int s = j % STAGES;
        // The stage's previous tile (j - STAGES) released: its (j / STAGES - 1)-th phase.
        if (j >= STAGES)
          kg::decode::mbar_wait(&empty[s], static_cast<unsigned>(j / STAGES - 1) & 1u);
        kg::decode::mbar_arrive_expect_tx(&full[s], stage_size);
        load_ws_stage<bm, PACKED>(smem + s * stage_size, &w_map, &x_map, a, r.row0, r.kt0 + j,
                                  k_tiles, &full[s]);
      }
  } else {
    float c[MT][BN / 2];
    zero_accumulators(c);
    for (int i = 0; i < r.count; ++i) {
      const int s = i % STAGES;
      kg::decode::mbar_wait(&full[s], static_cast<unsigned>(i / STAGES) & 1u);
      mma_stage_issue<MT, BN, bm>(c, base + static_cast<unsigned>(s * stage_size), wg);
      if constexpr (BN >= wgmma_overlap_min_bn) {
        // Tile i's wgmma's stay in flight while tile i - 1's are waited for: this warp reads
        // that stage no more, and the tensor cores are not left idle between tiles.
        wgmma_wait_all_but_one();
        if (i > 0 && t % 32 == 0) kg::decode::mbar_arrive(&empty[(i - 1) % STAGES]);
      } else {
        // (a stage released a tile sooner: one more in flight for the memory-bound batches)
        wgmma_wait_all();
        if (t % 32 == 0) kg::decode::mbar_arrive(&empty[s]);
      }
    }
    wgmma_wait_all();
    pin_accumulators(c);
    if (a.cluster)
      stage_cluster_part<MT, BN, WG, STAGES>(c, smem, wg, t);
    else if (PACKED && a.gated)
      store_wgmma_gated<MT, BN>(c, a, r.row0 + wg * MT * 64, t);
    else
      store_wgmma_tile<MT, BN>(c, a, r.row0 + wg * MT * 64, t, r.slice);
  }
  // (every thread: both finishes meet at barriers)
  if (a.cluster)
    finish_wgmma_cluster<bm>(a, smem, r);
  else if (a.split > 1)
    finish_split_k(a, r.tile, bm);
}

template <bool PACKED>
struct wgmma_ws_launch {
  template <int MT, int BN, int WG, int STAGES>
  struct of {
    static cudaError_t run(const gemv_args& a, int blocks, cudaStream_t s) {
      return launch_tma_fed<MT, BN, WG, STAGES>(gemv_wgmma_ws_kernel<MT, BN, WG, STAGES, PACKED>,
                                                (WG + 1) * 128, a, blocks, s, PACKED);
    }
  };
};

} // namespace kg::gemv_detail
