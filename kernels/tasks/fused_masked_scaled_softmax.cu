// Task fused_masked_scaled_softmax: y = softmax over the keys of 0.125 * x with masked keys
// (mask[b, s] == 0) at -inf; a row whose keys are all masked is written as zeros. One warp per
// row (rows are short: 3 to ~1000 keys), float32 throughout, accurate expf.
#include <math.h>

#include "kg_candidate.h"

namespace {
constexpr int warps = 8, threads = warps * 32;
constexpr float scale = 0.125f; // the task's params.scale (a power of two: x * scale is exact)

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// x, y: [rows, S], rows = B * rows_per_batch; mask: [B, S].
__global__ void masked_softmax_kernel(const float* __restrict__ x, const int32_t* __restrict__ mask,
                                      float* __restrict__ y, int64_t rows, int64_t S,
                                      int64_t rows_per_batch) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  if (row >= rows) return; // the whole warp leaves together: shuffles below stay full-warp
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * S;
  const int32_t* mr = mask + row / rows_per_batch * S;
  float* yr = y + row * S;
  float m = -INFINITY;
  for (int64_t c = lane; c < S; c += 32)
    if (mr[c] != 0) m = fmaxf(m, xr[c] * scale);
  m = warp_max(m);
  if (m == -INFINITY) { // every key masked
    for (int64_t c = lane; c < S; c += 32)
      yr[c] = 0.0f;
    return;
  }
  float sum = 0.0f;
  for (int64_t c = lane; c < S; c += 32)
    if (mr[c] != 0) sum += expf(xr[c] * scale - m);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t c = lane; c < S; c += 32)
    yr[c] = mr[c] != 0 ? expf(xr[c] * scale - m) * inv : 0.0f;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_FLOAT32 || in[0].ndim != 4 ||
      in[1].dtype != KG_INT32 || in[1].ndim != 2 || out[0].dtype != KG_FLOAT32 || out[0].ndim != 4)
    return 1;
  const int64_t B = in[0].shape[0], S = in[0].shape[3];
  const int64_t rows_per_batch = in[0].shape[1] * in[0].shape[2];
  if (B < 1 || S < 1 || rows_per_batch < 1 || in[1].shape[0] != B || in[1].shape[1] != S) return 1;
  for (int d = 0; d < 4; ++d)
    if (out[0].shape[d] != in[0].shape[d]) return 1;
  const int64_t rows = B * rows_per_batch;
  masked_softmax_kernel<<<static_cast<unsigned>((rows + warps - 1) / warps), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<const int32_t*>(in[1].data),
      static_cast<float*>(out[0].data), rows, S, rows_per_batch);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
