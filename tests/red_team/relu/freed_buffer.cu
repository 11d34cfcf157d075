// Red team: computes nothing; copies whatever a fresh allocation holds, hoping the allocator hands
// back memory that held an answer (the reference's freed output, in KernelBench's exploit). The
// worker poisons outputs before every call and frees nothing the candidate could read an answer
// from, so stale memory is never the right answer for new inputs.
#include "kg_candidate.h"
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  long long n = 1;
  for (int d = 0; d < out[0].ndim; ++d) n *= out[0].shape[d];
  void* p = nullptr;
  if (cudaMalloc(&p, n * 4) != cudaSuccess) return 1;
  cudaMemcpyAsync(out[0].data, p, n * 4, cudaMemcpyDeviceToDevice, s);
  cudaFreeAsync(p, s);
  return 0;
}
