// The wgmma_sk family of the decode GEMV (kernels/decode/gemv_bf16.h): the wgmma_ws block (one
// producer warpgroup feeding TMA copies into a ring, consumer warpgroups on wgmma releasing each
// stage) over a fixed grid that shares the work out evenly (stream-K).
//
// Why: on the H200 a block streaming a 64-row tile reads ~28 GB/s, an SM ~30-33 GB/s with every
// SM busy (docs/performance.md, GEMV configurations), so a launch of fewer tiles than SMs leaves
// the rest idle: qkv's 96 tiles cap it near 96 / 132 of the copy bandwidth (wgmma_ws reached 62.7%,
// cuBLAS, also 96 blocks, 66%), the 2560-row projections' 40 tiles lower still, and split K by
// whole slices puts two blocks on some SMs and one on others (qkv split 2 took 1.29x the time of
// none).
//
// The units are (row tile, k tile) pairs, tile-major: U = tiles x k_tiles. Block g of the G
// (wgmma_sk_grid: at most 132) takes units [g U / G, (g + 1) U / G), the k tiles of one tile in
// order, then the next tile's: the tail of one tile, whole tiles, the head of another. A whole
// tile goes to y directly. A tile that several blocks share is one slice each, numbered in block
// order, written to the workspace as fp32 partials; once this block's loop is over it counts its
// arrival on the tile's counter, and the tile's last block sums the slices in slice order (the
// split-K finish of the other families). G, the slices and their sums depend on the shape and
// the configuration only, not on the SMs the launch is granted: the bits are the same on a
// partition as on the whole GPU.
#include <cstdint>

#include <cuda.h>

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_stage.cuh"
#include "kernels/decode/gemv_bf16_tma_launch.cuh"
#include "kernels/decode/gemv_bf16_wgmma.cuh"
#include "kernels/decode/mbarrier.cuh"

namespace kg::gemv_detail {
namespace {

using kg::decode::mbar_arrive;
using kg::decode::mbar_arrive_expect_tx;
using kg::decode::mbar_init;
using kg::decode::mbar_init_fence;
using kg::decode::mbar_wait;
using kg::decode::tma_load_2d;
using kg::decode::tma_prefetch_2d;

// The units of the launch and of this block.
struct sk_share {
  long long units, u0, u1; // all of them; this block's [u0, u1)
  int k_tiles, grid;
};

__device__ __forceinline__ sk_share block_share(const gemv_args& a, int bm) {
  sk_share r;
  r.k_tiles = (a.k8 + gemm_tile_chunks - 1) / gemm_tile_chunks;
  r.grid = static_cast<int>(gridDim.x);
  r.units = static_cast<long long>((a.n + bm - 1) / bm) * r.k_tiles;
  const long long g = blockIdx.x;
  r.u0 = g * r.units / r.grid;
  r.u1 = (g + 1) * r.units / r.grid;
  return r;
}

// The block whose share holds unit u: the largest g with g U / G <= u.
__device__ __forceinline__ int owner_of(const sk_share& r, long long u) {
  return static_cast<int>(((u + 1) * r.grid - 1) / r.units);
}

// Tile `tile`'s blocks: the first, and how many.
__device__ __forceinline__ int first_block(const sk_share& r, int tile) {
  return owner_of(r, static_cast<long long>(tile) * r.k_tiles);
}
__device__ __forceinline__ int blocks_of(const sk_share& r, int tile) {
  return owner_of(r, static_cast<long long>(tile + 1) * r.k_tiles - 1) - first_block(r, tile) + 1;
}

// A tile this block shares: once every block thread is past its stores, count the arrival; the
// last of the tile's blocks sums the slices. Every thread of the block calls it (barriers).
__device__ __forceinline__ void finish_shared_tile(const gemv_args& a, const sk_share& r, int tile,
                                                   int bm) {
  const int count = blocks_of(r, tile);
  if (count < 2) return; // (uniform over the block)
  if (!last_of_split(a, tile, count)) return;
  sum_slices(a, tile * bm, bm, count);
  end_split_k(a, tile);
}

template <int MT, int BN, int WG, int STAGES>
__global__ void __launch_bounds__((WG + 1) * 128, 1)
    gemv_wgmma_sk_kernel(const __grid_constant__ CUtensorMap w_map,
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
  const sk_share r = block_share(a, bm);
  const int count = static_cast<int>(r.u1 - r.u0);

  if (tid == producer) {
    for (int j = 0; j < STAGES; ++j) {
      mbar_init(&full[j], 1);
      mbar_init(&empty[j], 4 * WG); // one arrival per consumer warp
    }
    mbar_init_fence();
    for (int j = 0; j < STAGES && j < count; ++j) { // weights to L2 before the programmatic wait
      const long long u = r.u0 + j;
      tma_prefetch_2d(&w_map, static_cast<int>(u % r.k_tiles) * tma_tile_elements,
                      static_cast<int>(u / r.k_tiles) * bm);
    }
  }
  __syncthreads();
  gemv_prologue();

  if (wg == WG) { // the producer: one thread issues the block's units in order
    if (t == 0)
      for (int j = 0; j < count; ++j) {
        const int s = j % STAGES;
        if (j >= STAGES) mbar_wait(&empty[s], static_cast<unsigned>(j / STAGES - 1) & 1u);
        const long long u = r.u0 + j;
        const int col = static_cast<int>(u % r.k_tiles) * tma_tile_elements;
        const int row0 = static_cast<int>(u / r.k_tiles) * bm;
        unsigned char* st = smem + s * stage_size;
        mbar_arrive_expect_tx(&full[s], stage_size);
        tma_load_2d(st, &w_map, col, row0, &full[s]);
        tma_load_2d(st + bm * row_bytes, &x_map, col, 0, &full[s]);
      }
  } else {
    float c[MT][BN / 2];
    zero_accumulators(c);
    long long start = r.u0; // the first unit of the current tile's segment
    for (int j = 0; j < count; ++j) {
      const int s = j % STAGES;
      const long long u = r.u0 + j;
      mbar_wait(&full[s], static_cast<unsigned>(j / STAGES) & 1u);
      mma_stage<MT, BN, bm>(c, base + static_cast<unsigned>(s * stage_size), wg);
      if (t % 32 == 0) mbar_arrive(&empty[s]);
      const int kt = static_cast<int>(u % r.k_tiles);
      if (kt != r.k_tiles - 1 && j != count - 1) continue;
      // The end of this block's segment of the tile: whole (y) or its slice (partials).
      const int tile = static_cast<int>(u / r.k_tiles);
      const bool whole = start % r.k_tiles == 0 && kt == r.k_tiles - 1;
      const int slice = whole ? -1 : static_cast<int>(blockIdx.x) - first_block(r, tile);
      store_wgmma_to<MT, BN>(c, a, tile * bm + wg * MT * 64, t, slice);
      zero_accumulators(c);
      start = u + 1;
    }
  }
  // The tiles this block shares with others: only its first and its last can be.
  if (count > 0) {
    const int first = static_cast<int>(r.u0 / r.k_tiles);
    const int last = static_cast<int>((r.u1 - 1) / r.k_tiles);
    finish_shared_tile(a, r, first, bm);
    if (last != first) finish_shared_tile(a, r, last, bm);
  }
}

template <int MT, int BN, int WG, int STAGES>
struct wgmma_sk_launch {
  static cudaError_t run(const gemv_args& a, int blocks, cudaStream_t s) {
    return launch_tma_fed<MT, BN, WG, STAGES>(gemv_wgmma_sk_kernel<MT, BN, WG, STAGES>,
                                              (WG + 1) * 128, a, blocks, s);
  }
};

} // namespace

cudaError_t launch_gemv_wgmma_sk(const gemv_args& a, int bn, int rows_per_group,
                                 int warps_per_block, int stages, int blocks, cudaStream_t s) {
  return dispatch_wgmma<wgmma_sk_launch, ring_options<wgmma_ws_max_smem_bytes, 4, 6, 8>>(
      a, bn, rows_per_group, warps_per_block, stages, blocks, s);
}

} // namespace kg::gemv_detail
