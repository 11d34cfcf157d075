// Task transpose_2d_fp32: y (C, R) = x (R, C)^T, float32. 32 x 32 tiles through shared memory
// (one padding column against bank conflicts) so that both the reads of x and the writes of y
// are coalesced; blocks of 32 x 8 threads, each thread moving 4 elements.
#include "kg_candidate.h"

namespace {
constexpr int tile = 32, rows = 8;

__global__ void transpose_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t r,
                                 int64_t c) {
  __shared__ float t[tile][tile + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * tile,
                r0 = static_cast<int64_t>(blockIdx.y) * tile;
  for (int j = threadIdx.y; j < tile; j += rows) {
    const int64_t i = r0 + j, k = c0 + threadIdx.x;
    if (i < r && k < c) t[j][threadIdx.x] = x[i * c + k];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < tile; j += rows) {
    const int64_t k = c0 + j, i = r0 + threadIdx.x;
    if (i < r && k < c) y[k * r + i] = t[threadIdx.x][j];
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 2 || out[0].shape[0] != in[0].shape[1] ||
      out[0].shape[1] != in[0].shape[0])
    return 1;
  const int64_t r = in[0].shape[0], c = in[0].shape[1];
  if (r == 0 || c == 0) return 0;
  if ((r + tile - 1) / tile > 65535) return 3; // grid y limit
  const dim3 grid(static_cast<unsigned>((c + tile - 1) / tile),
                  static_cast<unsigned>((r + tile - 1) / tile));
  transpose_kernel<<<grid, dim3(tile, rows), 0, s>>>(static_cast<const float*>(in[0].data),
                                                     static_cast<float*>(out[0].data), r, c);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
