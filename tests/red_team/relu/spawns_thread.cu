// Red team: hands the work to a thread of its own that outlives the call.
#include <thread>
#include "kg_candidate.h"
__global__ void relu_k(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.0f);
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  const kg_tensor x = in[0], y = out[0];
  std::thread([=] { relu_k<<<1024, 256, 0, s>>>((const float*)x.data, (float*)y.data, x.shape[0]); }).detach();
  return 0;
}
