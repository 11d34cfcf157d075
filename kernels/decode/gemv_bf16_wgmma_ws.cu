// The wgmma_ws family of the decode GEMV (kernels/decode/gemv_bf16.h): the wgmma_tma family's
// tiles, tensor maps and sums, with the block split by role and a deep ring
// (gemv_bf16_wgmma_ws.cuh has the kernel).
//
// Why: in the wgmma_tma kernel a stage is refilled only after the whole block has passed the
// tile before it (a __syncthreads a tile), so a ring of 3-4 stages keeps about 3 k tiles in
// flight, and deeper rings there were slower (docs/performance.md, GEMV configurations). cuBLAS's
// kernels for these shapes on the H200 (scripts/cublas_kernels.py: nvjet_sm90_tst_64x16_64x16_...)
// use 64-row tiles with 12-16 stages of 64-column k tiles, 384 threads and one block an SM.
#include "kernels/decode/gemv_bf16_wgmma_ws.cuh"

namespace kg::gemv_detail {

cudaError_t launch_gemv_wgmma_ws(const gemv_args& a, int bn, int rows_per_group,
                                 int warps_per_block, int stages, int blocks, cudaStream_t s) {
  return dispatch_wgmma<wgmma_ws_launch<false>::of,
                        ring_options<wgmma_ws_max_smem_bytes, 6, 8, 12, 16>>(
      a, bn, rows_per_group, warps_per_block, stages, blocks, s);
}

} // namespace kg::gemv_detail
