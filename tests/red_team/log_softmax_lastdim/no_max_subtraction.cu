// Red team (a wrong kernel, no cheat): y = x - log(sum(exp(x))) without subtracting the row
// maximum first. Under N(0,1) rows exp(x) stays below e^6 and the sum below 1e5: right to ~1e-6.
// expf overflows to inf above x = 88.7 (scaled rows x 100, shifted rows s > ~85: y = -inf) and the
// sum underflows to 0 when every x < -103 (shifted rows s < ~-110: y = +inf).
#include "kg_candidate.h"

namespace {
constexpr int threads = 256;

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

__global__ void log_softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t cols) {
  __shared__ float shared[threads / 32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    sum += expf(row[c]); // the fault: no max subtraction
  const float log_sum = logf(block_sum(sum, shared));
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    out[c] = row[c] - log_sum;
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
