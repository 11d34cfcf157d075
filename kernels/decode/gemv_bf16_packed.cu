// The packed family of the decode GEMV (kernels/decode/gemv_bf16.h): the mma family's kernel
// (tensor cores, the weights as the A operand, software-pipelined loads) over a copy of the
// weights laid out in the order its lanes load them (pack_gemv_weights).
//
// Why: the mma family reads the row-major weights 16 rows at a time, each of its blocks a few
// hundred bytes into each of its tile's 16 rows 19 KB apart, and on the down projection it stays
// well below the copy bandwidth at batch 8 (and at batch 1, where the arithmetic is nothing),
// while a plain contiguous read of the same 49.8 MB comes much closer to it. Packed, one
// 64-element step of a 16-row tile is 2 KB of consecutive bytes and a tile's steps follow one
// another, so each warp load is 512 consecutive bytes and a tile is one contiguous range that its
// blocks stream front to back, which is faster than the mma family at the down projection's batch
// 8 (docs/performance.md, GEMV configurations, has the figures).
//
// Registers: __launch_bounds__ asks for 20 warps an SM (at most 102 registers a thread). Without
// that bound ptxas gave the 8-warp kernel 72 registers instead of 110, and the same configuration
// was slower: the bound's schedule keeps more of each warp's loads in flight (docs/performance.md
// has the times). (Unroll 4 spills under it; it is slower either way.)
//
// Layout (16-byte chunks; tiles = ceil(n / 16), steps = k / 64): chunk
//   ((tile * steps + step) * 4 + 2 i + h) * 32 + 4 g + t
// holds elements 64 step + 8 (2t + h) .. + 8 of row 16 tile + 8 i + g (zero past n). Lane (g, t)
// thus loads, per step and (i, h), the chunk that the mma family's lane (g, t) loads from rows g
// and g + 8 at chunk 2t + h, so both feed the same registers to the same mma's in the same order:
// without split K, the same bits (tests/test_gpu_gemv.cpp).
//
// Split K interleaves: block s of a tile's split_k blocks takes super-steps s, s + split_k, ...
// of UNROLL x WPB steps (warp w of it: the w-th UNROLL steps of each), so at any moment the
// tile's blocks read one window of it side by side. (Contiguous slices were no slower at split
// 4, but split 1 is faster than either: docs/performance.md.)
#include "kernels/decode/dispatch_int.h"
#include "kernels/decode/gemv_bf16_kernel.cuh"

namespace kg::gemv_detail {
namespace {

constexpr int tile_rows_packed = 16;
constexpr int step_chunks_packed = 128; // 16-byte chunks of one tile step: 16 rows x 128 bytes

// A chunk of the packed layout from the row-major weights; one thread per packed chunk, so the
// writes are contiguous (the reads are 16-byte pieces of 16 rows: a one-time cost).
__global__ void pack_kernel(const uint4* __restrict__ w, uint4* __restrict__ packed, int n, int k8,
                            long long chunks) {
  const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= chunks) return;
  const int lane = static_cast<int>(o % 32), h = static_cast<int>(o / 32 % 2),
            i = static_cast<int>(o / 64 % 2);
  const long long tile_step = o / step_chunks_packed;
  const int steps = k8 / 8;
  const int step = static_cast<int>(tile_step % steps);
  const long long tile = tile_step / steps;
  const long long row = tile * tile_rows_packed + 8 * i + lane / 4;
  const int ch = step * 8 + 2 * (lane % 4) + h;
  packed[o] = row < n ? w[row * k8 + ch] : make_uint4(0, 0, 0, 0);
}

// A super-step's weights: UNROLL steps from `step`, per step the lane's four chunks (i, h).
// WHOLE: every step is in the slice; otherwise steps at or past `end` are zero.
template <int UNROLL, bool WHOLE>
__device__ __forceinline__ void load_packed(uint4 (&r)[UNROLL][2][2], const uint4* p, int step,
                                            int end) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const bool in = WHOLE || step + u < end;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        r[u][i][h] = in ? load_stream(p + static_cast<long long>(step + u) * step_chunks_packed +
                                      (2 * i + h) * 32)
                        : zero;
  }
}

// The super-step's mma's (the mma family's, gemv_bf16_mma.cu): x's chunks 8 step + 2t + h (L1).
template <int NT, int UNROLL, bool WHOLE>
__device__ __forceinline__ void mma_packed(const uint4 (&r)[UNROLL][2][2],
                                           const uint4* const (&xr)[NT], int step, int end, int t,
                                           float (&c)[NT][4]) {
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const bool in = WHOLE || step + u < end;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = (step + u) * 8 + 2 * t + h;
      mma_chunk_pair<NT>(c, r[u][0][h], r[u][1][h], xr, ch, in);
    }
  }
}

// Block = (tile, K slice) as in the mma family (block index = tile * split + slice); the block's
// warps take its super-steps' UNROLL-step pieces in warp order (see above), so without split K
// the block walks its tile front to back.
template <int NT, int UNROLL, int WPB>
__global__ void __launch_bounds__(WPB * 32, 20 / WPB) gemv_packed_kernel(const gemv_args a) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int tile = static_cast<int>(blockIdx.x) / a.split;
  const int slice = static_cast<int>(blockIdx.x) % a.split;
  const int steps = a.k8 / 8;
  const uint4* p = reinterpret_cast<const uint4*>(a.w) +
                   static_cast<long long>(tile) * steps * step_chunks_packed + lane;
  // Batch columns past nb read x's row 0: an mma output column depends only on its own x row,
  // and those columns are never stored.
  const uint4* xr[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int b = nt * 8 + g;
    xr[nt] =
        reinterpret_cast<const uint4*>(a.x) + static_cast<std::size_t>(b < a.nb ? b : 0) * a.k8;
  }
  const int begin = slice * WPB * UNROLL, end = steps, stride = a.split * WPB * UNROLL;
  gemv_prologue();

  float c[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      c[nt][e] = 0.0f;

  // The mma family's software pipeline: the next super-step's weights are loaded before the
  // current one's mma's (2 x UNROLL x 64 bytes per lane in flight).
  int step = begin + warp * UNROLL;
  if (step + UNROLL <= end) {
    uint4 cur[UNROLL][2][2];
    load_packed<UNROLL, true>(cur, p, step, end);
    for (;;) {
      const int next = step + stride;
      if (next + UNROLL > end) {
        mma_packed<NT, UNROLL, true>(cur, xr, step, end, t, c);
        step = next;
        break;
      }
      uint4 nxt[UNROLL][2][2];
      load_packed<UNROLL, true>(nxt, p, next, end);
      mma_packed<NT, UNROLL, true>(cur, xr, step, end, t, c);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            cur[u][i][h] = nxt[u][i][h];
      step = next;
    }
  }
  if (step < end) { // the tile's partial last super-step, if this warp has it
    uint4 r[UNROLL][2][2];
    load_packed<UNROLL, false>(r, p, step, end);
    mma_packed<NT, UNROLL, false>(r, xr, step, end, t, c);
  }

  finish_mma_tile<NT, WPB>(a, c, warp, g, t, tile, slice);
}

} // namespace

cudaError_t launch_gemv_packed(const gemv_args& a, int nt, int unroll, int warps_per_block,
                               int blocks, cudaStream_t s) {
  return dispatch_int<1, 2, 4>(nt, [&](auto n) {
    return dispatch_int<2, 4>(unroll, [&](auto u) {
      return dispatch_int<4, 8, 16>(warps_per_block, [&](auto w) -> cudaError_t {
        constexpr int NT = decltype(n)::value, U = decltype(u)::value, W = decltype(w)::value;
        // The mma family's register bound: 2 x UNROLL x 4 chunks per lane in flight.
        if constexpr (U * W > 32) {
          return cudaErrorInvalidValue;
        } else {
          return pdl::launch(gemv_packed_kernel<NT, U, W>, dim3(blocks), dim3(W * 32), 0, s,
                             a.programmatic, 1u, a);
        }
      });
    });
  });
}

cudaError_t launch_pack_weights(const __nv_bfloat16* w, __nv_bfloat16* packed, int n, int k,
                                cudaStream_t s) {
  const long long tiles = (n + tile_rows_packed - 1) / tile_rows_packed;
  const long long chunks = tiles * (k / 64) * step_chunks_packed;
  if (chunks == 0) return cudaSuccess;
  constexpr int threads = 256;
  pack_kernel<<<static_cast<unsigned>((chunks + threads - 1) / threads), threads, 0, s>>>(
      reinterpret_cast<const uint4*>(w), reinterpret_cast<uint4*>(packed), n, k / 8, chunks);
  return cudaGetLastError();
}

} // namespace kg::gemv_detail
