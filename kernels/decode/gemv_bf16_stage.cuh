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

// A block's place in the launch (block index = row tile * split + slice, as every family) and
// its K slice: k tiles kt0 .. kt0 + count - 1 (a.slice_len is a whole number of k tiles; the
// last slices may hold fewer or none).
struct ring_slice {
  int tile, slice, row0, kt0, count;
};
template <int BM>
__device__ __forceinline__ ring_slice block_slice(const gemv_args& a) {
  ring_slice r;
  r.tile = static_cast<int>(blockIdx.x) / a.split;
  r.slice = static_cast<int>(blockIdx.x) % a.split;
  r.row0 = r.tile * BM;
  const int k_tiles = (a.k8 + gemm_tile_chunks - 1) / gemm_tile_chunks;
  const int per_slice = a.slice_len / gemm_tile_chunks;
  r.kt0 = r.slice * per_slice;
  r.count = max(0, min(k_tiles, r.kt0 + per_slice) - r.kt0);
  return r;
}

// The ring's start: the first k tile's weights head for L2 before the programmatic wait
// (nothing is read before it: gemv_prologue); then the first STAGES - 1 k tiles into stages
// 0 .. STAGES - 2 of the ring at `smem`, commit group j completing stage j.
template <int BM, int BN, int THREADS, int STAGES, int STAGE_BYTES>
__device__ __forceinline__ void start_ring(unsigned char* smem, const gemv_args& a,
                                           const ring_slice& r, int tid) {
  if (r.count > 0)
    for (int i = tid; i < BM; i += THREADS)
      if (r.row0 + i < a.n)
        prefetch_l2(reinterpret_cast<const uint4*>(a.w) +
                    static_cast<std::size_t>(r.row0 + i) * a.k8 + r.kt0 * gemm_tile_chunks);
  gemv_prologue();
#pragma unroll
  for (int j = 0; j < STAGES - 1; ++j) {
    if (j < r.count) load_stage<BM, BN, THREADS>(smem + j * STAGE_BYTES, a, r.row0, r.kt0 + j, tid);
    kg::decode::cp_async_commit();
  }
}

} // namespace kg::gemv_detail
