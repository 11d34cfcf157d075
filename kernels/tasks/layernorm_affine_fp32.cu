// Task layernorm_affine_fp32: y = (x - mean) / sqrt(var + 1e-5) * weight + bias over the last
// dimension of x (R, C), biased variance, float32. One block per row; the mean and then the sum of
// squared deviations (two passes: no cancellation in E[x^2] - mean^2) are block reductions.
#include "kg_candidate.h"

namespace {
constexpr int threads = 256;
constexpr float eps = 1e-5f;

__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < threads / 32 ? shared[lane] : 0.0f;
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads(); // shared is reused by the next reduction
  return v;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int64_t cols) {
  __shared__ float shared[threads / 32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    sum += row[c];
  const float mean = block_sum(sum, shared) / static_cast<float>(cols);
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += threads) {
    const float d = row[c] - mean;
    ss += d * d;
  }
  const float rstd = rsqrtf(block_sum(ss, shared) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    out[c] = (row[c] - mean) * rstd * w[c] + b[c];
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 3 || n_out != 1 || in[0].ndim != 2 || out[0].ndim != 2) return 1;
  for (int k = 0; k < 3; ++k)
    if (in[k].dtype != KG_FLOAT32) return 1;
  if (out[0].dtype != KG_FLOAT32 || in[1].shape[0] != in[0].shape[1] ||
      in[2].shape[0] != in[0].shape[1])
    return 1;
  if (in[0].shape[0] == 0) return 0;
  layernorm_kernel<<<static_cast<unsigned>(in[0].shape[0]), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data),
      static_cast<const float*>(in[2].data), static_cast<float*>(out[0].data), in[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
