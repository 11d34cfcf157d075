// The wgmma family of the decode GEMV (kernels/decode/gemv_bf16.h): batch 16 to 128 on Hopper's
// warpgroup tensor-core instructions. The gemm family (gemv_bf16_gemm.cu) reads both operands out
// of shared memory into registers with ldmatrix before each mma.sync; on the H200 its best
// configurations at batch 64-128 stayed at 0.4-0.7x cuBLAS (docs/performance.md, GEMV
// configurations). Here wgmma.mma_async reads them from shared memory itself, through matrix
// descriptors, so the warps issue one instruction per 64 x bn x 16 product and no operand
// traffic through registers.
//
// The ring is the gemm family's (gemv_bf16_stage.cuh): per 64-element k tile a stage holds the
// block's BM weight rows and the group's BN x rows, 128 bytes a row, chunks XOR-swizzled by the
// row's low three bits -- the layout a wgmma descriptor calls K-major with the 128-byte swizzle,
// when the stage starts on a 1024-byte boundary (the dynamic shared memory is aligned up to one
// here). Both operands are K-major: A is the weights (M = rows), B is x (N = batch rows), the
// product A B^T is y^T's tile. A block has WG warpgroups of 128 threads; warpgroup g computes MT
// tiles of 64 rows from row g x MT x 64 of the block's tile, all BN batch columns.
//
// Per k tile: every thread waits for its cp.async copies, fences them for the async proxy
// (wgmma reads shared memory through it), and the block meets at a barrier; then each warpgroup
// issues its 4 (k16 steps) x MT wgmma's, commits them and waits for them before the stage may be
// refilled (gemv_bf16_wgmma.cuh has the instructions and where the accumulators sit).
//
// Each warpgroup adds its k tiles in ascending order and split K ends with the other families'
// fixed-order slice sum: the bits do not depend on which SMs run the blocks.
#include <cstdint>

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_stage.cuh"
#include "kernels/decode/gemv_bf16_wgmma.cuh"

namespace kg::gemv_detail {
namespace {

using kg::decode::cp_async_commit;
using kg::decode::cp_async_wait;

template <int MT, int BN, int WG, int STAGES>
__global__ void __launch_bounds__(WG * 128) gemv_wgmma_kernel(const gemv_args a) {
  constexpr int threads = WG * 128, bm = wg_block_rows<MT, WG>;
  constexpr int stage_size = wg_stage_bytes<MT, BN, WG>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned base; // the ring's shared address, for the descriptors
  unsigned char* smem = align_ring(smem_raw, base);
  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, t = tid % 128;
  const ring_slice r = block_slice<bm>(a);
  const int slice = r.slice, row0 = r.row0, kt0 = r.kt0, count = r.count;
  auto stage = [&](int i) { return smem + (i % STAGES) * stage_size; };
  start_ring<bm, BN, threads, STAGES, stage_size>(smem, a, r, tid);

  float c[MT][BN / 2];
  zero_accumulators(c);

  for (int i = 0; i < count; ++i) {
    cp_async_wait<STAGES - 2>(); // k tile i has landed (this thread's copies) ...
    fence_async_proxy();         // ... is visible to wgmma's reads ...
    __syncthreads();             // ... and so is every thread's; tile i - 1's slot is free
    const int next = i + STAGES - 1;
    if (next < count) load_stage<bm, BN, threads>(stage(next), a, row0, kt0 + next, tid);
    cp_async_commit();
    mma_stage<MT, BN, bm>(c, base + static_cast<unsigned>((i % STAGES) * stage_size), wg);
  }

  store_wgmma_tile<MT, BN>(c, a, row0 + wg * MT * 64, t, slice);
  if (a.split > 1) finish_split_k(a, r.tile, bm);
}

// The launch of one instantiation, for dispatch_wgmma.
template <int MT, int BN, int WG, int STAGES>
struct wgmma_launch {
  static cudaError_t run(const gemv_args& a, int blocks, cudaStream_t s) {
    constexpr int smem_bytes = wgmma_ring_bytes<MT, BN, WG, STAGES>;
    auto kernel = gemv_wgmma_kernel<MT, BN, WG, STAGES>;
    const cudaError_t e = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes);
    if (e != cudaSuccess) return e;
    return pdl::launch(kernel, dim3(blocks), dim3(WG * 128), smem_bytes, s, a.programmatic, 1u, a);
  }
};

} // namespace

cudaError_t launch_gemv_wgmma(const gemv_args& a, int bn, int rows_per_group, int warps_per_block,
                              int stages, int blocks, cudaStream_t s) {
  return dispatch_wgmma<wgmma_launch>(a, bn, rows_per_group, warps_per_block, stages, blocks, s);
}

} // namespace kg::gemv_detail
