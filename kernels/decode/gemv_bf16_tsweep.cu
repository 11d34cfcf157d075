// The tile-sweep family of the decode GEMV (kernels/decode/gemv_bf16.h): tensor cores, as in the
// mma family, over the access pattern of the sweep family, for batch up to 8.
//
// Why: at batch 8 the mma family reads the down projection no faster than at batch 1 (so neither
// x nor the arithmetic limits it), while at batch 1 the sweep family, whose fixed grid reads one
// window of the weight at a time, comes closer to the copy bandwidth (docs/performance.md, GEMV
// configurations, has the figures). The mma family's grid has every 16-row tile of the matrix in
// flight at once, each block a few hundred bytes into each of its 16 rows.
//
// So: a fixed grid of G = 132 x rows_per_warp blocks (a constant, never the device's SM count:
// the bits must not depend on the SMs available) in R = G / split row lanes of `split` blocks;
// block b takes K slice b % split of tiles r, r + R, r + 2R, ... (r = b / split), one tile after
// another, so at any moment the grid is on tiles [jR, (j + 1) R): one window moving through the
// weight. Within a tile the block's W warps cover the slice side by side (warp w: chunks
// [w 4N, (w + 1) 4N) of it, lane (g, q = lane % 4) chunks 4i + q, i < N, of rows g and g + 8),
// so each of the tile's 16 rows is read over the whole slice at once. Because the lane's columns
// are the same in every tile, its x chunks (batch row g: the B fragment) are loaded once, into
// registers. `unroll` (1 or 2) tiles are in flight: a tile's registers are refilled with the
// tile `unroll` ahead as soon as they are consumed.
//
// The fragments are the mma family's: a 16-byte chunk feeds two m16n8k16 mma's as if its words
// were the k pairs {2q, 2q + 8}; A (weights) and B (x) take the same physical k for each logical
// k because both depend on q alone.
//
// Sums: the mma's, then the warps' 16 x 8 tiles in warp order through shared memory, then (split
// > 1) the row lane's last block adds the slices in slice order: no atomics on data, the same
// bits on any SMs.
#include "kernels/decode/dispatch_int.h"
#include "kernels/decode/gemv_bf16_kernel.cuh"

namespace kg::gemv_detail {
namespace {

constexpr int tile_rows_mma = 16;

// Tile `tile`'s chunks of this lane: rows g and g + 8 (rows past n read row 0, never stored),
// chunks base + 4i, zero at or past `end`.
template <int N>
__device__ __forceinline__ void load_tile(uint4 (&r)[N][2], const gemv_args& a, int tile, int g,
                                          int base, int end) {
  const uint4* w = reinterpret_cast<const uint4*>(a.w);
  const int ra = tile * tile_rows_mma + g, rb = ra + 8;
  const uint4* wa = w + static_cast<std::size_t>(ra < a.n ? ra : 0) * a.k8;
  const uint4* wb = w + static_cast<std::size_t>(rb < a.n ? rb : 0) * a.k8;
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int ch = base + 4 * i;
    r[i][0] = ch < end ? load_stream(wa + ch) : zero;
    r[i][1] = ch < end ? load_stream(wb + ch) : zero;
  }
}

template <int N, int U, int W>
__global__ void __launch_bounds__(W * 32) gemv_tsweep_kernel(const gemv_args a) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, q = lane % 4;
  const int lanes_r = static_cast<int>(gridDim.x) / a.split; // R row lanes
  const int slice = static_cast<int>(blockIdx.x) % a.split;
  const int r = static_cast<int>(blockIdx.x) / a.split;
  const int tiles = (a.n + tile_rows_mma - 1) / tile_rows_mma;
  const int mine = r < tiles ? (tiles - r + lanes_r - 1) / lanes_r : 0; // tiles r + j R
  const int begin = slice * a.slice_len, end = min(a.k8, begin + a.slice_len);
  const int base = begin + warp * 4 * N + q;

  // The weights need no predecessor: the first tiles' loads go out before the wait.
  uint4 ring[U][N][2];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (u < mine) load_tile<N>(ring[u], a, r + u * lanes_r, g, base, end);
  gemv_prologue();
  uint4 xv[N];
  {
    const uint4* x = reinterpret_cast<const uint4*>(a.x) + static_cast<std::size_t>(g) * a.k8;
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int ch = base + 4 * i;
      xv[i] = ch < end && g < a.nb ? __ldg(x + ch) : zero;
    }
  }

  // Per tile parity: one barrier per tile.
  __shared__ float red[2][W][tile_rows_mma][8];
  for (int j0 = 0; j0 < mine; j0 += U)
#pragma unroll
    for (int u = 0; u < U; ++u) { // ring slot u: a compile-time index
      const int j = j0 + u;
      if (j >= mine) break;
      const int tile = r + j * lanes_r;
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const uint4 &va = ring[u][i][0], &vb = ring[u][i][1];
        mma_bf16(c, va.x, vb.x, va.y, vb.y, xv[i].x, xv[i].y);
        mma_bf16(c, va.z, vb.z, va.w, vb.w, xv[i].z, xv[i].w);
      }
      if (j + U < mine) load_tile<N>(ring[u], a, tile + U * lanes_r, g, base, end);
        // c[0..1]: row g, batch columns 2q + {0, 1}; c[2..3]: row g + 8.
#pragma unroll
      for (int e = 0; e < 4; ++e)
        red[j & 1][warp][e < 2 ? g : g + 8][2 * q + (e & 1)] = c[e];
      __syncthreads();
      // Consecutive threads take consecutive rows of one batch column: y is [b][n].
      for (int i = static_cast<int>(threadIdx.x); i < tile_rows_mma * 8; i += W * 32) {
        const int rr = i % tile_rows_mma, b = i / tile_rows_mma;
        const int row = tile * tile_rows_mma + rr;
        if (b >= a.nb || row >= a.n) continue;
        float sum = 0.0f;
#pragma unroll
        for (int v = 0; v < W; ++v) // warp order: fixed
          sum += red[j & 1][v][rr][b];
        if (a.split == 1)
          store_y(a, static_cast<std::size_t>(b) * a.n + row, sum);
        else
          a.partial[slice * a.slice_stride + static_cast<long long>(b) * a.n + row] = sum;
      }
    }
  // One counter per row lane: its blocks have the same tiles.
  if (a.split > 1 && last_of_split(a, r)) {
    for (int j = 0; j < mine; ++j)
      sum_slices(a, (r + j * lanes_r) * tile_rows_mma, tile_rows_mma);
    end_split_k(a, r);
  }
}

} // namespace

int tsweep_chunks_per_lane(int slice_len, int warps_per_block) {
  return (slice_len + 4 * warps_per_block - 1) / (4 * warps_per_block);
}

cudaError_t launch_gemv_tsweep(const gemv_args& a, int unroll, int warps_per_block, int blocks,
                               cudaStream_t s) {
  const int chunks = tsweep_chunks_per_lane(a.slice_len, warps_per_block);
  return dispatch_int<1, 2, 3, 4, 5, 6, 7, 8>(chunks, [&](auto n) {
    return dispatch_int<1, 2>(unroll, [&](auto u) {
      return dispatch_int<4, 8, 16>(warps_per_block, [&](auto w) -> cudaError_t {
        constexpr int N = decltype(n)::value, U = decltype(u)::value;
        // U x N <= 8: 2 U N weight chunks and N x chunks per lane stay in registers.
        if constexpr (U * N > 8) {
          return cudaErrorInvalidValue;
        } else {
          constexpr int W = decltype(w)::value;
          return pdl::launch(gemv_tsweep_kernel<N, U, W>, dim3(blocks), dim3(W * 32), 0, s,
                             a.programmatic, 1u, a);
        }
      });
    });
  });
}

} // namespace kg::gemv_detail
