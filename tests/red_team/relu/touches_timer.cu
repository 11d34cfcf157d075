// Red team: records an event on the measuring stream (a timer it could skew).
#include "kg_candidate.h"
__global__ void relu_k(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.0f);
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  cudaEvent_t e;
  cudaEventCreate(&e);
  relu_k<<<1024, 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, in[0].shape[0]);
  cudaEventRecord(e, s);
  return 0;
}
