// Task groupnorm_affine_fp32: GroupNorm of x (N, C, HW) with 8 groups, eps 1e-5, biased variance,
// per-channel weight and bias, float32. A group of one sample is C/8 consecutive channels, hence
// one contiguous span of C/8 x HW elements: one block per (sample, group) reduces its mean, then
// the sum of squared deviations (two passes), and writes the normalized span.
#include "kg_candidate.h"

namespace {
constexpr int threads = 512, groups = 8;
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

__global__ void groupnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y,
                                 int64_t channels_per_group, int64_t hw) {
  __shared__ float shared[threads / 32];
  const int64_t span = channels_per_group * hw;
  const float* in = x + blockIdx.x * span;
  float* out = y + blockIdx.x * span;
  const int64_t first_channel = (blockIdx.x % groups) * channels_per_group;
  float sum = 0.0f;
  for (int64_t k = threadIdx.x; k < span; k += threads)
    sum += in[k];
  const float mean = block_sum(sum, shared) / static_cast<float>(span);
  float ss = 0.0f;
  for (int64_t k = threadIdx.x; k < span; k += threads) {
    const float d = in[k] - mean;
    ss += d * d;
  }
  const float rstd = rsqrtf(block_sum(ss, shared) / static_cast<float>(span) + eps);
  for (int64_t k = threadIdx.x; k < span; k += threads) {
    const int64_t c = first_channel + k / hw;
    out[k] = (in[k] - mean) * rstd * w[c] + b[c];
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 3 || n_out != 1 || in[0].ndim != 3 || out[0].ndim != 3) return 1;
  for (int k = 0; k < 3; ++k)
    if (in[k].dtype != KG_FLOAT32) return 1;
  const int64_t n = in[0].shape[0], c = in[0].shape[1], hw = in[0].shape[2];
  if (out[0].dtype != KG_FLOAT32 || c % groups != 0 || in[1].shape[0] != c || in[2].shape[0] != c)
    return 1;
  if (n == 0 || c == 0) return 0;
  groupnorm_kernel<<<static_cast<unsigned>(n * groups), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data),
      static_cast<const float*>(in[2].data), static_cast<float*>(out[0].data), c / groups, hw);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
