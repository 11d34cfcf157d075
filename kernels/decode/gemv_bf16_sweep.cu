// The sweep family of the decode GEMV (kernels/decode/gemv_bf16.h), for batch 1 and 2: the grid
// reads the weight the way a plain contiguous read does.
//
// Why: a plain read of the down projection's 49.8 MB (grid-stride, 16-byte loads, the whole grid
// on one contiguous window that sweeps the buffer) comes much closer to the copy bandwidth than
// the simt and mma families, whose thousands of warps each walk their own rows (every row of the
// matrix in flight at once, 19 KB apart), whatever their split, unroll or block shape
// (docs/performance.md, GEMV configurations, has the figures).
//
// So here a block of T threads computes whole rows, one after another: block b takes rows b,
// b + G, b + 2G, ... (G = the grid: a fixed 132 x rows_per_warp blocks, the H200's SM count as a
// constant, never the device's -- the bits must not depend on the SMs available), and thread t
// holds chunks t, t + T, ... of the row (C = ceil(k8 / T) of them, masked past k8). At any moment
// the grid is on rows [jG, (j + 1) G): one contiguous window moving through the weight, as in the
// plain read, and every block has the same number of rows to within one. The thread's chunks sit
// at the same columns in every row, so its x chunks are loaded once, into registers (hence batch
// <= 2). `unroll` (1, 2, 4) rows are in flight per thread while the oldest is summed.
//
// Sums: each thread in ascending chunk and element order, the warp by a fixed xor butterfly, the
// block's warps in warp order: no split, no atomics, the same bits on any SMs.
#include "kernels/decode/gemv_bf16_kernel.cuh"

namespace kg::gemv_detail {
namespace {

constexpr int max_warps = 16;

template <int C>
__device__ __forceinline__ void load_row(uint4 (&v)[C], const uint4* row, int t, int T, int k8) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int col = t + c * T;
    v[c] = col < k8 ? load_stream(row + col) : zero;
  }
}

template <int BG, int C, int U>
__global__ void __launch_bounds__(max_warps * 32) gemv_sweep_kernel(const gemv_args a) {
  const int t = static_cast<int>(threadIdx.x), T = static_cast<int>(blockDim.x);
  const int warp = t / 32, lane = t % 32, warps = T / 32;
  const int G = static_cast<int>(gridDim.x), first = static_cast<int>(blockIdx.x);
  const uint4* w = reinterpret_cast<const uint4*>(a.w);
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  __shared__ float red[2][max_warps][BG]; // per row parity: one barrier per row
  // Rows of this block: first + j G, j < rows (the blocks' counts differ by at most one).
  const int rows = first < a.n ? (a.n - first + G - 1) / G : 0;

  // A ring of U rows in flight, row j in slot j % U. The weights need no predecessor: the first
  // rows' loads go out before the wait.
  uint4 ring[U][C];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (u < rows)
      load_row<C>(ring[u], w + static_cast<std::size_t>(first + u * G) * a.k8, t, T, a.k8);
  gemv_prologue();
  uint4 xv[BG][C];
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int b = 0; b < BG; ++b)
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int col = t + c * T;
      xv[b][c] =
          col < a.k8 && b < a.nb ? __ldg(x + static_cast<std::size_t>(b) * a.k8 + col) : zero;
    }

  for (int j0 = 0; j0 < rows; j0 += U)
#pragma unroll
    for (int u = 0; u < U; ++u) { // slot u: a compile-time index
      const int j = j0 + u;
      if (j >= rows) break;
      const std::size_t out = static_cast<std::size_t>(t) * a.n + first + j * G;
      const bool stores = t < BG && t < a.nb;
      // (the residual's load ahead of the sums: output_with)
      const __nv_bfloat16 prior = stores && a.add_to_y ? a.y[out] : __nv_bfloat16{};
      float acc[BG];
#pragma unroll
      for (int b = 0; b < BG; ++b)
        acc[b] = 0.0f;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float wf[8];
        unpack8(ring[u][c], wf);
#pragma unroll
        for (int b = 0; b < BG; ++b) {
          float xf[8];
          unpack8(xv[b][c], xf);
#pragma unroll
          for (int e = 0; e < 8; ++e)
            acc[b] = fmaf(wf[e], xf[e], acc[b]);
        }
      }
      if (j + U < rows) // refill the slot with the row U ahead
        load_row<C>(ring[u], w + static_cast<std::size_t>(first + (j + U) * G) * a.k8, t, T, a.k8);
#pragma unroll
      for (int b = 0; b < BG; ++b) {
        const float v = warp_sum(acc[b]);
        if (lane == 0) red[j & 1][warp][b] = v;
      }
      __syncthreads();
      if (stores) {
        float sum = 0.0f;
        for (int v = 0; v < warps; ++v) // warp order: fixed
          sum += red[j & 1][v][t];
        a.y[out] = output_with(a, prior, sum);
      }
    }
}

template <int BG, int C, int U>
cudaError_t launch_sweep_one(const gemv_args& a, int wpb, int blocks, cudaStream_t s) {
  return pdl::launch(gemv_sweep_kernel<BG, C, U>, dim3(blocks), dim3(wpb * 32), 0, s,
                     a.programmatic, 1u, a);
}

template <int BG, int U>
cudaError_t launch_sweep_chunks(const gemv_args& a, int chunks, int wpb, int blocks,
                                cudaStream_t s) {
  switch (chunks) {
  case 1:
    return launch_sweep_one<BG, 1, U>(a, wpb, blocks, s);
  case 2:
    return launch_sweep_one<BG, 2, U>(a, wpb, blocks, s);
  case 3:
    return launch_sweep_one<BG, 3, U>(a, wpb, blocks, s);
  case 4:
    return launch_sweep_one<BG, 4, U>(a, wpb, blocks, s);
  case 5:
    return launch_sweep_one<BG, 5, U>(a, wpb, blocks, s);
  case 6:
    return launch_sweep_one<BG, 6, U>(a, wpb, blocks, s);
  case 7:
    return launch_sweep_one<BG, 7, U>(a, wpb, blocks, s);
  case 8:
    return launch_sweep_one<BG, 8, U>(a, wpb, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int BG>
cudaError_t launch_sweep_unroll(const gemv_args& a, int chunks, int unroll, int wpb, int blocks,
                                cudaStream_t s) {
  switch (unroll) {
  case 1:
    return launch_sweep_chunks<BG, 1>(a, chunks, wpb, blocks, s);
  case 2:
    return launch_sweep_chunks<BG, 2>(a, chunks, wpb, blocks, s);
  case 4:
    return launch_sweep_chunks<BG, 4>(a, chunks, wpb, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t launch_gemv_sweep(const gemv_args& a, int bg, int unroll, int warps_per_block,
                              int blocks, cudaStream_t s) {
  const int threads = warps_per_block * 32;
  const int chunks = (a.k8 + threads - 1) / threads;
  if (warps_per_block > max_warps) return cudaErrorInvalidValue;
  switch (bg) {
  case 1:
    return launch_sweep_unroll<1>(a, chunks, unroll, warps_per_block, blocks, s);
  case 2:
    return launch_sweep_unroll<2>(a, chunks, unroll, warps_per_block, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
