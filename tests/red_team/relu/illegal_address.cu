// Red team: writes through a null device pointer.
#include "kg_candidate.h"
__global__ void bad(float* y) { y[threadIdx.x] = 1.0f; }
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  bad<<<1, 32, 0, s>>>(nullptr);
  return 0;
}
