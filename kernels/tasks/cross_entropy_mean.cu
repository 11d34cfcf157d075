// Task cross_entropy_mean: mean over rows of logsumexp(logits[r]) - logits[r, target[r]], logits
// (R, C) float32, target (R) int64, loss (1) float32. A one-thread kernel zeroes the loss (outputs
// arrive as NaN), then one block per row reduces its max and sum of exponentials and adds its
// loss / R atomically (float32; the order of the R additions moves the result by ~1e-6).
#include <cfloat>
#include <cmath>

#include "kg_candidate.h"

namespace {
constexpr int threads = 256;

__device__ float block_reduce(float v, bool is_max, float* shared) {
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < threads / 32 ? shared[lane] : (is_max ? -FLT_MAX : 0.0f);
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  __syncthreads(); // shared is reused by the next reduction
  return v;
}

__global__ void zero_kernel(float* loss) {
  *loss = 0.0f;
}

__global__ void cross_entropy_kernel(const float* __restrict__ logits,
                                     const int64_t* __restrict__ target, float* __restrict__ loss,
                                     int64_t rows, int64_t cols) {
  __shared__ float shared[threads / 32];
  const float* row = logits + blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    m = fmaxf(m, row[c]);
  m = block_reduce(m, true, shared);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    sum += expf(row[c] - m);
  sum = block_reduce(sum, false, shared);
  if (threadIdx.x == 0) {
    const int64_t t = target[blockIdx.x];
    // An out-of-range class makes the loss NaN (torch raises): never a silent wrong number.
    const float picked = t >= 0 && t < cols ? row[t] : NAN;
    atomicAdd(loss, (m + logf(sum) - picked) / static_cast<float>(rows));
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_FLOAT32 || in[1].dtype != KG_INT64 ||
      out[0].dtype != KG_FLOAT32 || in[0].ndim != 2 || in[1].ndim != 1 ||
      in[1].shape[0] != in[0].shape[0])
    return 1;
  const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
  float* loss = static_cast<float*>(out[0].data);
  zero_kernel<<<1, 1, 0, s>>>(loss);
  if (rows > 0)
    cross_entropy_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(
        static_cast<const float*>(in[0].data), static_cast<const int64_t*>(in[1].data), loss, rows,
        cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
