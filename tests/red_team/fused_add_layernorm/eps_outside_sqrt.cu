// Red team (a wrong kernel, no cheat): h = x + residual, y = (h - mean) / (sqrt(var) + eps) *
// weight + bias -- eps added outside the square root. The relative error is about
// eps/std - eps/(2 var): 5e-6 with N(0,1) inputs (var(h) ~ 2), inside rtol 1e-5; this task's
// low_variance rows (sd 5% of |mean|, std(h) 0.07..0.7) are off by up to 9e-4 relative, and rows
// scaled by 1e-3 (std(h) 1.4e-3, below sqrt(eps) = 3.2e-3) by a factor 2.4.
#include "kg_candidate.h"

namespace {
constexpr int threads = 256;
constexpr float eps = 1e-5f; // the task's params.eps

__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < threads / 32 ? shared[lane] : 0.0f;
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  return v;
}

__global__ void add_layernorm_kernel(const float* __restrict__ x, const float* __restrict__ res,
                                     const float* __restrict__ w, const float* __restrict__ b,
                                     float* __restrict__ h, float* __restrict__ y, int64_t C) {
  __shared__ float shared[threads / 32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * C;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += threads) {
    const float v = x[base + c] + res[base + c];
    h[base + c] = v;
    sum += v;
  }
  const float mean = block_sum(sum, shared) / static_cast<float>(C);
  float sq = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += threads) {
    const float d = h[base + c] - mean;
    sq += d * d;
  }
  const float var = block_sum(sq, shared) / static_cast<float>(C);
  const float inv = 1.0f / (sqrtf(var) + eps); // the fault: eps belongs inside the sqrt
  for (int64_t c = threadIdx.x; c < C; c += threads)
    y[base + c] = (h[base + c] - mean) * inv * w[c] + b[c];
}

bool is_f32(const kg_tensor& t, int ndim) {
  return t.dtype == KG_FLOAT32 && t.ndim == ndim;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 4 || n_out != 2 || !is_f32(in[0], 2) || !is_f32(in[1], 2) || !is_f32(in[2], 1) ||
      !is_f32(in[3], 1) || !is_f32(out[0], 2) || !is_f32(out[1], 2))
    return 1;
  const int64_t R = in[0].shape[0], C = in[0].shape[1];
  if (R < 1 || C < 1 || R > 2147483647 || in[2].shape[0] != C || in[3].shape[0] != C) return 1;
  add_layernorm_kernel<<<static_cast<unsigned>(R), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data),
      static_cast<const float*>(in[2].data), static_cast<const float*>(in[3].data),
      static_cast<float*>(out[0].data), static_cast<float*>(out[1].data), C);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
