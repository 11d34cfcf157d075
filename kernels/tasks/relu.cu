// Task relu: y = max(x, 0), float32. The verified substrate for the relu task.
#include "kg_candidate.h"

namespace {
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = fmaxf(x[i], 0.0f);
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32) return 1;
  const int64_t n = in[0].shape[0];
  relu_kernel<<<1056, 256, 0, s>>>(static_cast<const float*>(in[0].data),
                                   static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
