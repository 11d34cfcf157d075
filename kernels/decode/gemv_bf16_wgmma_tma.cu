// The wgmma_tma family of the decode GEMV (kernels/decode/gemv_bf16.h): the wgmma family's
// kernel (gemv_bf16_wgmma.cu) with its ring filled by the Tensor Memory Accelerator instead of
// cp.async. With cp.async every thread issues its 16-byte copies and waits for them, and on the
// H200 the family's large-tile configurations (two warpgroups, 256 rows a block) ran at 8-16% of
// copy bandwidth at batch 128, slower than its one-warpgroup tiles (docs/performance.md, GEMV
// configurations): a block of 128-256 threads cannot keep enough 16-byte copies in flight. Here
// one thread issues a stage as two tensor copies (the block's weight tile and the x tile), each
// one instruction for up to 32 KB, completing on the stage's mbarrier, and the tensor maps give
// the ring its 128-byte swizzle and zero-fill rows past n, columns past k and batch rows past nb.
//
// Per k tile i: the block meets at a barrier once every warpgroup has finished tile i - 1's
// wgmma's (so its stage is free); thread 0 refills that stage with tile i + STAGES - 1; every
// thread waits on tile i's barrier (phase parity (i / STAGES) % 2: a stage's j-th fill completes
// its j-th phase) and its warpgroup runs the tile (mma_stage). The sums, their order and the
// split-K finish are the wgmma family's, so the two families give the same bits.
#include <cstdint>

#include <cuda.h>

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_stage.cuh"
#include "kernels/decode/gemv_bf16_tma_launch.cuh"
#include "kernels/decode/gemv_bf16_wgmma.cuh"
#include "kernels/decode/mbarrier.cuh"

namespace kg::gemv_detail {
namespace {

using kg::decode::mbar_arrive_expect_tx;
using kg::decode::mbar_init;
using kg::decode::mbar_init_fence;
using kg::decode::mbar_wait;
using kg::decode::tma_load_2d;
using kg::decode::tma_prefetch_2d;

// w_map: the weights in boxes of the block's rows x 64 columns; x_map: the group's x rows in
// boxes of BN rows x 64 columns (rows past nb arrive as zeros).
template <int MT, int BN, int WG, int STAGES>
__global__ void __launch_bounds__(WG * 128)
    gemv_wgmma_tma_kernel(const __grid_constant__ CUtensorMap w_map,
                          const __grid_constant__ CUtensorMap x_map, const gemv_args a) {
  constexpr int bm = wg_block_rows<MT, WG>;
  constexpr int stage_size = wg_stage_bytes<MT, BN, WG>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES];
  unsigned base; // the ring's shared address, for the descriptors
  unsigned char* smem = align_ring(smem_raw, base);
  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, t = tid % 128;
  const ring_slice r = block_slice<bm>(a);

  // Tile j of the slice -> stage j % STAGES: the weight box, then the x box behind it; the
  // barrier's phase completes when both boxes' bytes (zero-filled ones included) have landed.
  auto issue = [&](int j) {
    unsigned char* st = smem + (j % STAGES) * stage_size;
    unsigned long long* bar = &full[j % STAGES];
    const int col = (r.kt0 + j) * tma_tile_elements;
    mbar_arrive_expect_tx(bar, stage_size);
    tma_load_2d(st, &w_map, col, r.row0, bar);
    tma_load_2d(st + bm * row_bytes, &x_map, col, 0, bar);
  };
  if (tid == 0) {
    for (int j = 0; j < STAGES; ++j)
      mbar_init(&full[j], 1);
    mbar_init_fence();
    // The weights never depend on the kernel ahead: their first tiles head for L2 before the
    // programmatic wait (gemv_prologue), as the other families' first loads do.
    for (int j = 0; j < STAGES - 1 && j < r.count; ++j)
      tma_prefetch_2d(&w_map, (r.kt0 + j) * tma_tile_elements, r.row0);
  }
  __syncthreads();
  gemv_prologue();
  if (tid == 0)
    for (int j = 0; j < STAGES - 1 && j < r.count; ++j)
      issue(j);

  float c[MT][BN / 2];
  zero_accumulators(c);

  for (int i = 0; i < r.count; ++i) {
    if (i > 0) __syncthreads(); // every warpgroup is past tile i - 1: its stage is free
    if (tid == 0 && i + STAGES - 1 < r.count) issue(i + STAGES - 1);
    mbar_wait(&full[i % STAGES], static_cast<unsigned>(i / STAGES) & 1u);
    mma_stage<MT, BN, bm>(c, base + static_cast<unsigned>((i % STAGES) * stage_size), wg);
  }

  store_wgmma_tile<MT, BN>(c, a, r.row0 + wg * MT * 64, t, r.slice);
  if (a.split > 1) finish_split_k(a, r.tile, bm);
}

// The launch of one instantiation, for dispatch_wgmma.
template <int MT, int BN, int WG, int STAGES>
struct wgmma_tma_launch {
  static cudaError_t run(const gemv_args& a, int blocks, cudaStream_t s) {
    return launch_tma_fed<MT, BN, WG, STAGES>(gemv_wgmma_tma_kernel<MT, BN, WG, STAGES>, WG * 128,
                                              a, blocks, s);
  }
};

} // namespace

cudaError_t launch_gemv_wgmma_tma(const gemv_args& a, int bn, int rows_per_group,
                                  int warps_per_block, int stages, int blocks, cudaStream_t s) {
  return dispatch_wgmma<wgmma_tma_launch>(a, bn, rows_per_group, warps_per_block, stages, blocks,
                                          s);
}

} // namespace kg::gemv_detail
