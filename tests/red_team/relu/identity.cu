// Red team: y = x, which passes only where inputs are never negative (torch.rand inputs).
#include "kg_candidate.h"
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  cudaMemcpyAsync(out[0].data, in[0].data, in[0].shape[0] * 4, cudaMemcpyDeviceToDevice, s);
  return 0;
}
