// The wgmma_ws family of the decode GEMV (kernels/decode/gemv_bf16.h): the wgmma_tma family's
// tiles, tensor maps and sums, with the block split by role and a deep ring. One producer
// warpgroup (one of its threads) keeps the ring full with TMA copies, refilling a stage as soon
// as every consumer warp has released it; the consumer warpgroups wait for a stage, run its
// wgmma's and release it, never meeting at a block-wide barrier inside the loop.
//
// Why: in the wgmma_tma kernel a stage is refilled only after the whole block has passed the
// tile before it (a __syncthreads a tile), so a ring of 3-4 stages keeps about 3 k tiles in
// flight, and deeper rings there were slower (docs/performance.md, GEMV configurations). cuBLAS's
// kernels for these shapes on the H200 (scripts/cublas_kernels.py: nvjet_sm90_tst_64x16_64x16_...)
// use 64-row tiles with 12-16 stages of 64-column k tiles, 384 threads and one block an SM.
//
// Per k tile j of the block's slice, stage s = j % STAGES: full[s] completes its phase when the
// TMA bytes of tile j have landed (the producer arrives with the expected bytes); empty[s]
// completes its phase when each of the 4 x WG consumer warps has arrived after its wgmma's of
// tile j have completed, and the producer waits for that before loading tile j + STAGES there.
// The sums and their order are the wgmma family's (the same k16 steps into the same
// accumulators), so the three families give the same bits; the split-K finish is theirs too.
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

// WG consumer warpgroups (threads 0 .. 128 WG - 1, as the wgmma kernel's) and one producer
// warpgroup behind them: 128 (WG + 1) threads, one block an SM by its shared memory.
template <int MT, int BN, int WG, int STAGES>
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

  if (tid == producer) {
    for (int j = 0; j < STAGES; ++j) {
      mbar_init(&full[j], 1);
      mbar_init(&empty[j], 4 * WG); // one arrival per consumer warp
    }
    mbar_init_fence();
    // The weights never depend on the kernel ahead: the first tiles head for L2 before the
    // programmatic wait (gemv_prologue), as in the other families.
    for (int j = 0; j < STAGES && j < r.count; ++j)
      tma_prefetch_2d(&w_map, (r.kt0 + j) * tma_tile_elements, r.row0);
  }
  __syncthreads();
  gemv_prologue();

  if (wg == WG) { // the producer: one thread issues every tile of the slice, in order
    if (t == 0)
      for (int j = 0; j < r.count; ++j) {
        const int s = j % STAGES;
        // The stage's previous tile (j - STAGES) released: its (j / STAGES - 1)-th phase.
        if (j >= STAGES) mbar_wait(&empty[s], static_cast<unsigned>(j / STAGES - 1) & 1u);
        unsigned char* st = smem + s * stage_size;
        const int col = (r.kt0 + j) * tma_tile_elements;
        mbar_arrive_expect_tx(&full[s], stage_size);
        tma_load_2d(st, &w_map, col, r.row0, &full[s]);
        tma_load_2d(st + bm * row_bytes, &x_map, col, 0, &full[s]);
      }
  } else {
    float c[MT][BN / 2];
    zero_accumulators(c);
    for (int i = 0; i < r.count; ++i) {
      const int s = i % STAGES;
      mbar_wait(&full[s], static_cast<unsigned>(i / STAGES) & 1u);
      // (commits and waits for its wgmma's: this warp reads the stage no more)
      mma_stage<MT, BN, bm>(c, base + static_cast<unsigned>(s * stage_size), wg);
      if (t % 32 == 0) mbar_arrive(&empty[s]);
    }
    store_wgmma_tile<MT, BN>(c, a, r.row0 + wg * MT * 64, t, r.slice);
  }
  if (a.split > 1) finish_split_k(a, r.tile, bm); // (every thread: it meets at barriers)
}

template <int MT, int BN, int WG, int STAGES>
struct wgmma_ws_launch {
  static cudaError_t run(const gemv_args& a, int blocks, cudaStream_t s) {
    return launch_tma_fed<MT, BN, WG, STAGES>(gemv_wgmma_ws_kernel<MT, BN, WG, STAGES>,
                                              (WG + 1) * 128, a, blocks, s);
  }
};

} // namespace

cudaError_t launch_gemv_wgmma_ws(const gemv_args& a, int bn, int rows_per_group,
                                 int warps_per_block, int stages, int blocks, cudaStream_t s) {
  return dispatch_wgmma<wgmma_ws_launch, ring_options<wgmma_ws_max_smem_bytes, 6, 8, 12, 16>>(
      a, bn, rows_per_group, warps_per_block, stages, blocks, s);
}

} // namespace kg::gemv_detail
