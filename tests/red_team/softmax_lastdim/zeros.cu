// Red team: writes zeros (passes a loose absolute tolerance on softmax's small outputs).
#include "kg_candidate.h"
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  cudaMemsetAsync(out[0].data, 0, in[0].shape[0] * in[0].shape[1] * 4, s);
  return 0;
}
