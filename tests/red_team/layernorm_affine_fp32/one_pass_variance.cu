// Red team (a wrong kernel, no cheat): LayerNorm with a one-pass variance, E[x^2] - E[x]^2 in
// float32 (one reduction of (sum, sum of squares) instead of two passes). Fine while |mean| is
// small next to the std (N(0,1) rows); catastrophic cancellation when it is not: shifted rows
// (mean 10..1000, std 1) lose up to all of var's bits (E[x^2] ~ 1e6 carries float32 rounding
// ~0.1 at mean 1000), and low_variance rows (std 1e-3 |mean|) lose most of them.
#include "kg_candidate.h"

namespace {
constexpr int threads = 256;
constexpr float eps = 1e-5f;

__device__ float2 block_sum2(float2 v, float2* shared) {
  for (int o = 16; o > 0; o /= 2) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < threads / 32 ? shared[lane] : make_float2(0.0f, 0.0f);
  for (int o = 16; o > 0; o /= 2) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  return v;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int64_t cols) {
  __shared__ float2 shared[threads / 32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float2 acc = make_float2(0.0f, 0.0f);
  for (int64_t c = threadIdx.x; c < cols; c += threads) {
    const float v = row[c];
    acc.x += v;
    acc.y += v * v;
  }
  const float2 tot = block_sum2(acc, shared);
  const float mean = tot.x / static_cast<float>(cols);
  const float var = fmaxf(tot.y / static_cast<float>(cols) - mean * mean, 0.0f); // the fault
  const float rstd = rsqrtf(var + eps);
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
