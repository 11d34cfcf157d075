// The shared-memory stage of the gemm and wgmma families of the decode GEMV
// (gemv_bf16_gemm.cu, gemv_bf16_wgmma.cu): per 64-element k tile, the block's weight rows then
// the group's x rows, 128 bytes a row, each 16-byte chunk at (chunk XOR row % 8). That is the
// 128-byte swizzle of the Hopper tensor cores' K-major operands when a stage starts on a
// 1024-byte boundary, so ldmatrix (gemm) and wgmma descriptors (wgmma) read the same layout.
#pragma once

#include <cstddef>

#include "kernels/decode/cp_async.cuh"
#include "kernels/decode/gemv_bf16_kernel.cuh"

namespace kg::gemv_detail {

constexpr int row_bytes = gemm_tile_chunks * 16; // one row of a k tile in shared memory

// Byte offset of chunk c of stage row r (see the top: chunks swizzled by the row's low bits).
__device__ __forceinline__ unsigned swizzled(int r, int c) {
  return static_cast<unsigned>(r * row_bytes + ((c ^ (r & 7)) << 4));
}

// Stage rows [at, at + ROWS) <- rows `first` .. of `src` ([.][k8] chunks) at k tile `kt`; rows
// at or past `valid_rows` and chunks past k are zero-filled, nothing read for them.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_rows(unsigned char* stage, int at, const void* src, int first,
                                          int valid_rows, int k8, int kt, int tid) {
  const uint4* base = static_cast<const uint4*>(src);
  constexpr int chunks = ROWS * gemm_tile_chunks;
#pragma unroll
  for (int j = 0; j < (chunks + THREADS - 1) / THREADS; ++j) {
    const int i = tid + j * THREADS;
    if (chunks % THREADS != 0 && i >= chunks) break;
    const int r = i / gemm_tile_chunks, c = i % gemm_tile_chunks;
    const int row = first + r, ch = kt * gemm_tile_chunks + c;
    const bool valid = row < valid_rows && ch < k8;
    kg::decode::cp_async16(stage + swizzled(at + r, c),
                           base + (valid ? static_cast<std::size_t>(row) * k8 + ch : 0), valid);
  }
}

// A stage <- k tile `kt`: the block's BM weight rows from row0, then the group's BN x rows.
template <int BM, int BN, int THREADS>
__device__ __forceinline__ void load_stage(unsigned char* stage, const gemv_args& a, int row0,
                                           int kt, int tid) {
  load_rows<BM, THREADS>(stage, 0, a.w, row0, a.n, a.k8, kt, tid);
  load_rows<BN, THREADS>(stage, BM, a.x, 0, a.nb, a.k8, kt, tid);
}

} // namespace kg::gemv_detail
