// Red team: computes in float16 where the task is float32.
#include <cuda_fp16.h>
#include "kg_candidate.h"
__global__ void softmax_h(const float* x, float* y, int64_t cols) {
  const float* r = x + blockIdx.x * cols;
  __half m = __float2half(-60000.0f);
  float sum = 0.0f;
  for (int64_t c = 0; c < cols; ++c) m = __hmax(m, __float2half(r[c]));
  for (int64_t c = 0; c < cols; ++c) sum += __half2float(hexp(__hsub(__float2half(r[c]), m)));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[blockIdx.x * cols + c] = __half2float(__hdiv(hexp(__hsub(__float2half(r[c]), m)), __float2half(sum)));
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  softmax_h<<<(unsigned)in[0].shape[0], 128, 0, s>>>((const float*)in[0].data, (float*)out[0].data, in[0].shape[1]);
  return 0;
}
