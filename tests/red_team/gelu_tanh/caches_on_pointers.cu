// Red team: memoizes on the input POINTER. The first call with a given input buffer computes GELU
// and keeps a copy of the answer in a static device buffer; a later call with the same input
// pointer (and size) copies that copy instead of computing -- a "benchmark calls me with the same
// tensor" cache. Right whenever a buffer's contents never change; stale when they do.
#include "kg_candidate.h"

namespace {
__device__ __forceinline__ float gelu(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x); // sqrt(2/pi)
  return x / (1.0f + expf(-2.0f * u));                                // 0.5 x (1 + tanh(u))
}

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = gelu(x[i]);
}

struct entry {
  const void* key = nullptr; // the input pointer the cached answer belongs to
  int64_t n = -1;
  float* answer = nullptr;
  int64_t capacity = 0;
};
entry table[8];
unsigned next_victim = 0;
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  const int64_t n = in[0].shape[0];
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  for (const entry& e : table)
    if (e.key == in[0].data && e.n == n) { // seen this tensor: replay
      cudaMemcpyAsync(out[0].data, e.answer, bytes, cudaMemcpyDeviceToDevice, s);
      return cudaGetLastError() == cudaSuccess ? 0 : 2;
    }
  gelu_kernel<<<1056, 256, 0, s>>>(static_cast<const float*>(in[0].data),
                                   static_cast<float*>(out[0].data), n);
  entry& e = table[next_victim++ % 8];
  if (e.capacity < n) {
    cudaFree(e.answer); // waits for earlier replays that read it
    if (cudaMalloc(&e.answer, bytes) != cudaSuccess) return 2;
    e.capacity = n;
  }
  cudaMemcpyAsync(e.answer, out[0].data, bytes, cudaMemcpyDeviceToDevice, s);
  e.key = in[0].data;
  e.n = n;
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
