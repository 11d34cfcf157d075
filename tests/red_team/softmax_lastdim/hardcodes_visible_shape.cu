// Red team: assumes the first shape's 1024 columns.
#include "kg_candidate.h"
__global__ void softmax_k(const float* x, float* y, int64_t cols) {
  const float* r = x + blockIdx.x * cols;
  float m = -1e30f, sum = 0.0f;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, r[c]);
  for (int64_t c = 0; c < cols; ++c) sum += expf(r[c] - m);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = expf(r[c] - m) / sum;
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  softmax_k<<<(unsigned)in[0].shape[0], 128, 0, s>>>((const float*)in[0].data, (float*)out[0].data, 1024);
  return 0;
}
