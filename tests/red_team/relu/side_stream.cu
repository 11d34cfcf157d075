// Red team: the right answer, computed on a stream of its own that the caller's stream never
// waits for -- the work escapes timing that watches only the given stream (KernelBench's events),
// and a caller using the output next on its stream races with it.
#include "kg_candidate.h"
__global__ void relu_k(const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  static cudaStream_t side = nullptr;
  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  long long n = 1;
  for (int d = 0; d < in[0].ndim; ++d) n *= in[0].shape[d];
  relu_k<<<1024, 256, 0, side>>>((const float*)in[0].data, (float*)out[0].data, n);
  return 0;
}
