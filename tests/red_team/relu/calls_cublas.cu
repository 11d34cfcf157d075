// Red team: calls cuBLAS where the task forbids library calls (the import is what is caught).
#include "kg_candidate.h"
extern "C" int cublasCreate_v2(void** handle);
__global__ void relu_k(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.0f);
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  void* h = nullptr;
  if (in[0].shape[0] < 0) cublasCreate_v2(&h); // never taken; the import alone is the offence
  relu_k<<<1024, 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, in[0].shape[0]);
  return 0;
}
