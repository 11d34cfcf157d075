// The gemm family of the decode GEMV (kernels/decode/gemv_bf16.h): batch 16 to 128, where the mma
// family's x loads through L1 grow with the batch and halve its speed (docs/performance.md, GEMV
// configurations). Here a block stages both operands in shared memory and every x byte it loads
// serves all of its rows: a skinny GEMM, tensor cores on a multi-stage cp.async pipeline.
//
// A block owns a tile of BM = MT x 16 x WM weight rows, the group's BN batch rows, and one K
// slice of whole 64-element k tiles (block index = row tile * split + slice, as every family).
// Per k tile a stage holds the tile's BM weight rows and BN x rows, 128 bytes each, every 16-byte
// chunk at (chunk XOR row % 8) so that the eight rows an ldmatrix phase reads fall on eight
// different bank groups. STAGES - 1 k tiles are in flight while one is computed (the first k
// tile's weights are prefetched to L2 before the programmatic wait). The WM x WN warps split the
// tile: warp (wm, wn) computes rows wm x MT x 16 .. and batch columns wn x NTW x 8 .. with m16n8k16
// mma's, A (weights) and B (x, which is B^T row-major, the mma's "col" operand) read by ldmatrix.
//
// Each block adds its k tiles in ascending order (each mma's own order is fixed by the
// hardware), and split K ends with the other families' fixed-order slice sum: the same bits
// whichever SMs run the blocks, so solo and co-located decode agree.
#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_stage.cuh"

namespace kg::gemv_detail {
namespace {

using kg::decode::cp_async_commit;
using kg::decode::cp_async_wait;

// Four 8 x 8 b16 matrices from shared memory: lane l gives the address of row l % 8 of matrix
// l / 8; d[j] is this lane's part of matrix j (row lane / 4, columns 2 (lane % 4) + {0, 1}).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&d)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(addr)
               : "memory");
}

// A block's shape: weight rows, batch rows, bytes of one stage.
template <int MT, int WM>
constexpr int block_rows = MT * 16 * WM;
template <int NTW, int WN>
constexpr int block_cols = NTW * 8 * WN;
template <int MT, int NTW, int WM, int WN>
constexpr int stage_bytes = (block_rows<MT, WM> + block_cols<NTW, WN>)*row_bytes;

// One k tile's four k16 steps of the warp's MT x NTW mma tiles.
template <int MT, int NTW, int BM>
__device__ __forceinline__ void compute_tile(unsigned stage, int warp_row0, int warp_col0, int lane,
                                             float (&c)[MT][NTW][4]) {
#pragma unroll
  for (int ks = 0; ks < gemm_tile_chunks / 2; ++ks) {
    // A: matrices 0..3 = rows 0-7 / 8-15 of the m16 tile at k chunk 2ks, then at 2ks + 1 -- the
    // mma's a0..a3.
    unsigned af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      ldmatrix_x4(af[mt], stage + swizzled(warp_row0 + mt * 16 + lane % 16, 2 * ks + lane / 16));
    // B: per pair of n8 tiles, matrices 0..3 = (tile 0, chunk 2ks), (tile 0, 2ks + 1), (tile 1,
    // 2ks), (tile 1, 2ks + 1) -- b0, b1 of each.
    unsigned bf[NTW][2];
#pragma unroll
    for (int np = 0; np < NTW / 2; ++np) {
      unsigned d[4];
      const int r = BM + warp_col0 + np * 16 + (lane / 16) * 8 + lane % 8;
      ldmatrix_x4(d, stage + swizzled(r, 2 * ks + (lane / 8) % 2));
      bf[2 * np][0] = d[0];
      bf[2 * np][1] = d[1];
      bf[2 * np + 1][0] = d[2];
      bf[2 * np + 1][1] = d[3];
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NTW; ++nt)
        mma_bf16(c[mt][nt], af[mt][0], af[mt][1], af[mt][2], af[mt][3], bf[nt][0], bf[nt][1]);
  }
}

template <int MT, int NTW, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(WM* WN * 32) gemv_gemm_kernel(const gemv_args a) {
  constexpr int threads = WM * WN * 32, bm = block_rows<MT, WM>, bn = block_cols<NTW, WN>;
  constexpr int stage_size = stage_bytes<MT, NTW, WM, WN>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int warp_row0 = (warp % WM) * MT * 16, warp_col0 = (warp / WM) * NTW * 8;
  const ring_slice r = block_slice<bm>(a);
  const int slice = r.slice, row0 = r.row0, kt0 = r.kt0, count = r.count;
  auto stage = [&](int i) { return smem + (i % STAGES) * stage_size; };
  start_ring<bm, bn, threads, STAGES, stage_size>(smem, a, r, tid);

  float c[MT][NTW][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        c[mt][nt][e] = 0.0f;

  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  for (int i = 0; i < count; ++i) {
    cp_async_wait<STAGES - 2>(); // k tile i has landed (this thread's copies) ...
    __syncthreads();             // ... and every thread's; the slot of tile i - 1 is free
    const int next = i + STAGES - 1;
    if (next < count) {
      load_stage<bm, bn, threads>(stage(next), a, row0, kt0 + next, tid);
    }
    cp_async_commit(); // (empty near the end: the group count stays in step)
    compute_tile<MT, NTW, bm>(base + (i % STAGES) * stage_size, warp_row0, warp_col0, lane, c);
  }

  // The m16n8 layout: c[..][0..1] row g, columns 2t + {0, 1}; c[..][2..3] row g + 8.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + warp_row0 + mt * 16 + g + (e >= 2 ? 8 : 0);
        const int b = warp_col0 + nt * 8 + 2 * t + (e & 1);
        if (row >= a.n || b >= a.nb) continue;
        if (a.split == 1)
          store_y(a, static_cast<std::size_t>(b) * a.n + row, c[mt][nt][e]);
        else
          a.partial[slice * a.slice_stride + static_cast<long long>(b) * a.n + row] = c[mt][nt][e];
      }
  if (a.split > 1) finish_split_k(a, r.tile, bm);
}

template <int MT, int NTW, int WM, int WN, int STAGES>
cudaError_t launch_gemm_one(const gemv_args& a, int blocks, cudaStream_t s) {
  constexpr int smem_bytes = STAGES * stage_bytes<MT, NTW, WM, WN>;
  // The limits gemv_config_supported checks on the host: nothing outside them is compiled.
  constexpr int rows = block_rows<MT, WM>;
  if constexpr (MT * NTW > gemm_max_mma_tiles || rows > gemm_max_tile_rows ||
                smem_bytes > gemm_max_smem_bytes) {
    return cudaErrorInvalidValue;
  } else {
    auto kernel = gemv_gemm_kernel<MT, NTW, WM, WN, STAGES>;
    const cudaError_t e = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes);
    if (e != cudaSuccess) return e;
    return pdl::launch(kernel, dim3(blocks), dim3(WM * WN * 32), smem_bytes, s, a.programmatic, 1u,
                       a);
  }
}

template <int MT, int NTW, int WM, int WN>
cudaError_t launch_gemm_stages(const gemv_args& a, int stages, int blocks, cudaStream_t s) {
  switch (stages) {
  case 3:
    return launch_gemm_one<MT, NTW, WM, WN, 3>(a, blocks, s);
  case 4:
    return launch_gemm_one<MT, NTW, WM, WN, 4>(a, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int MT, int NTW, int WN>
cudaError_t launch_gemm_warps(const gemv_args& a, int wpb, int stages, int blocks, cudaStream_t s) {
  switch (wpb) {
  case 4:
    return launch_gemm_stages<MT, NTW, 4 / WN, WN>(a, stages, blocks, s);
  case 8:
    return launch_gemm_stages<MT, NTW, 8 / WN, WN>(a, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int MT, int WN>
cudaError_t launch_gemm_cols(const gemv_args& a, int bn, int wpb, int stages, int blocks,
                             cudaStream_t s) {
  switch (bn / (8 * WN)) { // NTW: n8 tiles per warp, even (ldmatrix loads them in pairs)
  case 2:
    return launch_gemm_warps<MT, 2, WN>(a, wpb, stages, blocks, s);
  case 4:
    return launch_gemm_warps<MT, 4, WN>(a, wpb, stages, blocks, s);
  case 8:
    return launch_gemm_warps<MT, 8, WN>(a, wpb, stages, blocks, s);
  case 16:
    return launch_gemm_warps<MT, 16, WN>(a, wpb, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int MT>
cudaError_t launch_gemm_wn(const gemv_args& a, int bn, int batch_warps, int wpb, int stages,
                           int blocks, cudaStream_t s) {
  switch (batch_warps) {
  case 1:
    return launch_gemm_cols<MT, 1>(a, bn, wpb, stages, blocks, s);
  case 2:
    return launch_gemm_cols<MT, 2>(a, bn, wpb, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t launch_gemv_gemm(const gemv_args& a, int bn, int rows_per_warp, int batch_warps,
                             int warps_per_block, int stages, int blocks, cudaStream_t s) {
  switch (rows_per_warp) {
  case 16:
    return launch_gemm_wn<1>(a, bn, batch_warps, warps_per_block, stages, blocks, s);
  case 32:
    return launch_gemm_wn<2>(a, bn, batch_warps, warps_per_block, stages, blocks, s);
  case 64:
    return launch_gemm_wn<4>(a, bn, batch_warps, warps_per_block, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
