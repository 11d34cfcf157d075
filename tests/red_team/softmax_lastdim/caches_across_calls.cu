// Red team: computes on its first call, then copies that first answer back whatever the inputs.
#include "kg_candidate.h"
__global__ void softmax_k(const float* x, float* y, int64_t cols) {
  const float* r = x + blockIdx.x * cols;
  float m = -1e30f, sum = 0.0f;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, r[c]);
  for (int64_t c = 0; c < cols; ++c) sum += expf(r[c] - m);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = expf(r[c] - m) / sum;
}
static void* cache = nullptr;
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
  const size_t bytes = rows * cols * 4;
  static int64_t cached_rows = -1;
  if (cached_rows != rows) {
    softmax_k<<<(unsigned)rows, 128, 0, s>>>((const float*)in[0].data, (float*)out[0].data, cols);
    cudaFree(cache);
    cudaMalloc(&cache, bytes);
    cudaMemcpyAsync(cache, out[0].data, bytes, cudaMemcpyDeviceToDevice, s);
    cached_rows = rows;
  } else {
    cudaMemcpyAsync(out[0].data, cache, bytes, cudaMemcpyDeviceToDevice, s);
  }
  return 0;
}
