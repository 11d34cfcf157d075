// Internal to kernels/decode/gemv_bf16*.cu: the arguments of one GEMV launch (one batch group)
// and the launchers: the simt family's per rows_per_warp, the bulk, mma and sweep families', each
// compiled in its own TU so the ~250 kernel instantiations build in parallel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace kg::gemv_detail {

struct gemv_args {
  const __nv_bfloat16* x = nullptr; // rows [b0, b0 + nb) of the caller's x: [nb][k]
  const __nv_bfloat16* w = nullptr; // [n][k] (the packed family: its packed layout)
  __nv_bfloat16* y = nullptr;       // rows [b0, b0 + nb) of the caller's y: [nb][n]
  float* partial = nullptr;     // split_k > 1: slice s of batch row b at s * slice_stride + b * n
  unsigned* counters = nullptr; // split_k > 1: one per row tile, 0 between launches
  long long slice_stride = 0;   // floats between two slices' partials
  int nb = 0;                   // valid batch rows in this group (<= the template's group)
  int n = 0;
  int k8 = 0;        // k / 8: 16-byte chunks per row
  int split = 1;     // K slices
  int slice_len = 0; // chunks per slice (the last one may be shorter or empty)
  int cluster = 0;   // gemv_config::cluster: the split blocks of a tile are one cluster
  // 1: the SwiGLU epilogue (launch_gemv_bf16_gated; split 1) and y is [nb][n / 2]. simt,
  // rows_per_warp 2: a warp's rows are i and i + n / 2 (a gate row and its up row). wgmma_pk:
  // a.w is the paired wgmma_tiles copy, whose rows 16 s + i and 16 s + 8 + i (i < 8) are gate row
  // 8 s + i and its up row, so one thread holds both sums (gemv_bf16_wgmma.cuh's layout).
  int gated = 0;
  // launch_gemv_bf16's gemv_fusion (gemv_bf16.h). norm_w: x is the residual stream and the
  // kernel reads bf16(RMSNorm(x) * norm_w) in its place (simt only). add_to_y: the outputs are
  // added into y, each sum rounded to bf16 first (the residual add).
  const __nv_bfloat16* norm_w = nullptr;
  float norm_eps = 0.0f;
  int add_to_y = 0;
  bool programmatic = false; // launch attribute only (programmatic_launch.cuh)
};

// Queues one batch group. bg: the batch group size the kernel is compiled for (power of two,
// rows_per_warp * bg <= 32); blocks: row tiles x split. cudaErrorInvalidValue for a combination
// that has no kernel.
template <int RowsPerWarp>
cudaError_t launch_gemv_rows(const gemv_args& a, int bg, int unroll, int warps_per_block,
                             int blocks, cudaStream_t s);

extern template cudaError_t launch_gemv_rows<1>(const gemv_args&, int, int, int, int, cudaStream_t);
extern template cudaError_t launch_gemv_rows<2>(const gemv_args&, int, int, int, int, cudaStream_t);
extern template cudaError_t launch_gemv_rows<4>(const gemv_args&, int, int, int, int, cudaStream_t);

// The bulk-copy family (gemv_bf16_bulk.cu): bg as above with bg <= 8; stages: the ring's depth.
// Sets the kernel's dynamic shared memory limit on the current device the first time it needs
// more than the default 48 KB.
cudaError_t launch_gemv_bulk(const gemv_args& a, int bg, int rows_per_warp, int stages,
                             int warps_per_block, int blocks, cudaStream_t s);

// Bytes of the bulk family's stage ring (dynamic shared memory) for a tile of `tile_rows` rows.
constexpr int bulk_stage_chunks = 64; // 16-byte chunks of one row per stage: 1 KB
constexpr int bulk_ring_bytes(int tile_rows, int stages) {
  return stages * tile_rows * bulk_stage_chunks * 16;
}
constexpr int bulk_max_ring_bytes = 96 * 1024; // two blocks per SM still fit (228 KB)

// Above 48 KB of shared memory, static and dynamic together, a kernel must opt in, once per
// kernel and device (cudaFuncSetAttribute); this does it the first time a kernel launches with a
// ring (any `bytes` > 0: its static part is not known here) and remembers, per device
// and kernel address, under a mutex (several host threads may launch at once; the decode engine
// captures graphs). Keyed by address: every GEMV kernel has the same type, and a flag per type
// once let only the first kernel's ring past 48 KB on the H200.
cudaError_t allow_dynamic_smem(const void* kernel, int bytes);

// The tensor-core family (gemv_bf16_mma.cu): nt: 8-column batch tiles the kernel is compiled for
// (1, 2 or 4, >= ceil(nb / 8)).
cudaError_t launch_gemv_mma(const gemv_args& a, int nt, int unroll, int warps_per_block, int blocks,
                            cudaStream_t s);

// The packed family (gemv_bf16_packed.cu): the mma family's kernel over a.w in the packed layout
// (pack_gemv_weights); a.slice_len is a whole number of 64-element steps (a multiple of 8).
cudaError_t launch_gemv_packed(const gemv_args& a, int nt, int unroll, int warps_per_block,
                               int blocks, cudaStream_t s);
// The packed copy of w (n x k, k % 64 == 0) into `packed` (gemv_packed_bytes(n, k) bytes).
cudaError_t launch_pack_weights(const __nv_bfloat16* w, __nv_bfloat16* packed, int n, int k,
                                cudaStream_t s);

// The gemm family (gemv_bf16_gemm.cu): bn: the batch tile the kernel is compiled for (16, 32,
// 64 or 128, a power of two >= 16 x batch_warps and >= a.nb); rows_per_warp 16, 32, 64;
// batch_warps 1, 2 (warps side by side along the batch); stages 3, 4. a.slice_len is a whole
// number of k tiles (gemm_tile_chunks chunks each). cudaErrorInvalidValue outside the limits
// below (checked on the host by gemv_config_supported).
cudaError_t launch_gemv_gemm(const gemv_args& a, int bn, int rows_per_warp, int batch_warps,
                             int warps_per_block, int stages, int blocks, cudaStream_t s);
constexpr int gemm_tile_chunks = 8;     // a k tile: 64 elements, 8 16-byte chunks of a row
constexpr int gemm_max_batch = 128;     // the largest batch tile (the family's batch group)
constexpr int gemm_max_mma_tiles = 16;  // m16n8 tiles per warp: 64 float accumulators a lane
constexpr int gemm_max_tile_rows = 256; // weight rows of a block
constexpr int gemm_max_smem_bytes = 200 * 1024; // the stage ring (227 KB per block at most)
// The block's weight rows and its ring's bytes for a batch tile bn (0 where unsupported).
constexpr int gemm_tile_rows(int rows_per_warp, int warps_per_block, int batch_warps) {
  return rows_per_warp * warps_per_block / batch_warps;
}
constexpr int gemm_smem_bytes(int tile_rows, int bn, int stages) {
  return stages * (tile_rows + bn) * gemm_tile_chunks * 16;
}

// The wgmma family (gemv_bf16_wgmma.cu): bn as the gemm family's (16, 32, 64 or 128, >= a.nb);
// rows_per_group: a warpgroup's rows (64 or 128); warps_per_block 4 or 8 (one or two
// warpgroups); stages 3, 4; a.slice_len whole k tiles. cudaErrorInvalidValue outside the limits
// below (checked on the host by gemv_config_supported).
cudaError_t launch_gemv_wgmma(const gemv_args& a, int bn, int rows_per_group, int warps_per_block,
                              int stages, int blocks, cudaStream_t s);
// The wgmma_tma family (gemv_bf16_wgmma_tma.cu): the wgmma family's kernel and limits, its ring
// filled by TMA tensor copies (a.x and a.w 16-byte aligned, a.k8 x 8 columns).
cudaError_t launch_gemv_wgmma_tma(const gemv_args& a, int bn, int rows_per_group,
                                  int warps_per_block, int stages, int blocks, cudaStream_t s);
// The wgmma_ws family (gemv_bf16_wgmma_ws.cu): the wgmma_tma family's tiles and bits, one
// producer warpgroup more, stages 6, 8, 12, 16 in a ring of at most wgmma_ws_max_smem_bytes.
cudaError_t launch_gemv_wgmma_ws(const gemv_args& a, int bn, int rows_per_group,
                                 int warps_per_block, int stages, int blocks, cudaStream_t s);
// The wgmma_pk family (gemv_bf16_wgmma_pk.cu): the wgmma_ws block over a.w in the wgmma_tiles
// layout (launch_pack_wgmma_tiles), stages 4, 6, 8; the wgmma_ws family's bits.
cudaError_t launch_gemv_wgmma_pk(const gemv_args& a, int bn, int rows_per_group,
                                 int warps_per_block, int stages, int blocks, cudaStream_t s);
// The wgmma_sw family (gemv_bf16_wgmma_sw.cu): the batch as M (bn <= 64: one m64, else two),
// tile_rows (40, 48, 64, 80, 96 or 128) weight rows as N, stages 4, 6, 8 where the ring fits
// (cudaErrorInvalidValue elsewhere); row-major a.w by TMA.
cudaError_t launch_gemv_wgmma_sw(const gemv_args& a, int bn, int tile_rows, int stages, int blocks,
                                 cudaStream_t s);
// The wgmma_tiles copy of w (n x k, k % 8 == 0) into `packed` (wgmma_tiles_bytes(n, k) bytes).
// paired (n % 16 == 0): the copy's rows in the gated order, row 16 s + i of the copy being w's
// row 8 s + i and row 16 s + 8 + i w's row n / 2 + 8 s + i (i < 8).
cudaError_t launch_pack_wgmma_tiles(const __nv_bfloat16* w, __nv_bfloat16* packed, int n, int k,
                                    cudaStream_t s, bool paired = false);
// The row of w that row `row` (< n) of the paired copy holds.
__host__ __device__ constexpr int paired_source_row(int row, int n) {
  return row % 16 < 8 ? row / 16 * 8 + row % 16 : n / 2 + row / 16 * 8 + row % 16 - 8;
}
constexpr int wgmma_tile_unit_bytes = 64 * 128; // one 64-row tile of one 64-column k tile
// Rows of the copy: n rounded up to 256 (a block's most rows), so every block's 64-row units
// exist (those past n are zero).
constexpr long long wgmma_tiles_rows(int n) {
  return (n + 255LL) / 256 * 256;
}
constexpr long long wgmma_tiles_bytes(int n, int k) {
  return wgmma_tiles_rows(n) * ((k + 63LL) / 64 * 64) * 2;
}
// 216 KB of ring and 1 KB to align it: under the 227 KB a block may have, with the barriers.
constexpr int wgmma_ws_max_smem_bytes = 216 * 1024 + 1024;
constexpr int wgmma_max_accumulators = 128; // float accumulators a thread: (rows / 64) x bn / 2
// The gemm family's ring plus 1 KB to align it to the 128-byte swizzle's 1024-byte atom.
constexpr int wgmma_max_smem_bytes = gemm_max_smem_bytes + 1024;
constexpr int wgmma_tile_rows(int rows_per_group, int warps_per_block) {
  return rows_per_group * (warps_per_block / 4);
}
constexpr int wgmma_smem_bytes(int tile_rows, int bn, int stages) {
  return gemm_smem_bytes(tile_rows, bn, stages) + 1024;
}

// The sweep family (gemv_bf16_sweep.cu): bg 1 or 2; unroll 1, 2 or 4 rows in flight; blocks:
// the fixed grid (132 x the configuration's rows_per_warp).
cudaError_t launch_gemv_sweep(const gemv_args& a, int bg, int unroll, int warps_per_block,
                              int blocks, cudaStream_t s);
constexpr int sweep_grid_unit = 132; // the H200's SM count, as a constant

// The tile-sweep family (gemv_bf16_tsweep.cu): batch group 8; unroll 1 or 2 tiles in flight;
// blocks: the fixed grid (132 x rows_per_warp, split included).
cudaError_t launch_gemv_tsweep(const gemv_args& a, int unroll, int warps_per_block, int blocks,
                               cudaStream_t s);
// Chunks per lane of a slice of slice_len chunks (the kernel's N).
int tsweep_chunks_per_lane(int slice_len, int warps_per_block);

} // namespace kg::gemv_detail
