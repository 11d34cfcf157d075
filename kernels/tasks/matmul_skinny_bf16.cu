// Task matmul_skinny_bf16: C (M, N) = A (M, K) @ B (K, N) with few rows M (decode-like),
// bfloat16 inputs and output, float32 accumulation. Streaming B once is the whole cost, so each
// block owns 32 columns and splits K over 16 warps: lane j of warp w reads B[k, n0 + j] for
// k = w, w + 16, ... (64 contiguous bytes per warp and row) and keeps 8 row accumulators; the A
// values are the same for the whole warp (broadcast loads). The 16 partial sums of each output
// are added in shared memory. M is walked 8 rows at a time.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
using bf16 = __nv_bfloat16;
constexpr int cols = 32, slices = 16, mtile = 8, threads = cols * slices;

__global__ void __launch_bounds__(threads)
    skinny_kernel(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ c,
                  int64_t m, int64_t n, int64_t k) {
  __shared__ float red[slices][mtile][cols];
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * cols + lane;
  const bool valid = col < n;
  for (int64_t m0 = 0; m0 < m; m0 += mtile) {
    const int rows = static_cast<int>(m - m0 < mtile ? m - m0 : mtile);
    float acc[mtile];
#pragma unroll
    for (int j = 0; j < mtile; ++j)
      acc[j] = 0.0f;
    if (valid) {
#pragma unroll 4
      for (int64_t kk = w; kk < k; kk += slices) {
        const float bv = __bfloat162float(b[kk * n + col]);
#pragma unroll
        for (int j = 0; j < mtile; ++j)
          if (j < rows) acc[j] += __bfloat162float(a[(m0 + j) * k + kk]) * bv;
      }
    }
#pragma unroll
    for (int j = 0; j < mtile; ++j)
      red[w][j][lane] = acc[j];
    __syncthreads();
    if (w < rows && valid) {
      float sum = 0.0f;
      for (int q = 0; q < slices; ++q)
        sum += red[q][w][lane];
      c[(m0 + w) * n + col] = __float2bfloat16(sum);
    }
    __syncthreads(); // red is rewritten for the next 8 rows
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[1].dtype != KG_BFLOAT16 ||
      out[0].dtype != KG_BFLOAT16 || in[0].ndim != 2 || in[1].ndim != 2 || out[0].ndim != 2)
    return 1;
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  if (in[1].shape[0] != k || out[0].shape[0] != m || out[0].shape[1] != n) return 1;
  if (m == 0 || n == 0) return 0;
  skinny_kernel<<<static_cast<unsigned>((n + cols - 1) / cols), threads, 0, s>>>(
      static_cast<const bf16*>(in[0].data), static_cast<const bf16*>(in[1].data),
      static_cast<bf16*>(out[0].data), m, n, k);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
