// Task log_softmax_lastdim: y = x - max - log(sum(exp(x - max))) over the last dimension of x
// (R, C), float32. One block per row; the max and the sum are block reductions in float32 (expf
// and logf, not the fast intrinsics: the outputs are ~ -log C and checked to 1e-5).
#include <cfloat>

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

__global__ void log_softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t cols) {
  __shared__ float shared[threads / 32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    m = fmaxf(m, row[c]);
  m = block_reduce(m, true, shared);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    sum += expf(row[c] - m);
  sum = block_reduce(sum, false, shared);
  const float log_sum = logf(sum);
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    out[c] = (row[c] - m) - log_sum;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 2)
    return 1;
  if (in[0].shape[0] == 0) return 0;
  log_softmax_kernel<<<static_cast<unsigned>(in[0].shape[0]), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), in[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
